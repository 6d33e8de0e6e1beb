"""The docs and the code that defines what they describe do not drift apart: every marker that
pytest.ini declares (its one definition) is explained in docs/markers.md or gpu_markers.md, and
those pages explain no marker that does not exist; every repository path the docs, .ci/run, the
scripts or a docstring name exists."""

import configparser
import re
from pathlib import Path

from tests.common.paths import ROOT


def _declared_markers() -> set[str]:
    ini = configparser.ConfigParser()
    ini.read(ROOT / "pytest.ini")
    lines = ini["pytest"]["markers"].strip().splitlines()
    return {m.group(1) for line in lines if (m := re.match(r"\s*(\w+)", line))}


def _documented_markers(page: Path) -> set[str]:
    """The backticked names in the first column of the page's first table."""
    text = page.read_text()
    table = text[text.index("| marker |") :].split("\n\n", 1)[0]
    return {m for row in table.splitlines()[2:] for m in re.findall(r"`(\w+)", row.split("|")[1])}


def test_every_declared_marker_is_documented_and_nothing_else():
    documented = _documented_markers(ROOT / "docs" / "markers.md") | _documented_markers(ROOT / "gpu_markers.md")
    declared = _declared_markers()
    assert declared - documented == set(), f"declared in pytest.ini, explained nowhere: {declared - documented}"
    assert documented - declared == set(), f"explained, but pytest.ini declares no such marker: {documented - declared}"


def test_the_check_sees_a_missing_marker(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# x\n\n| marker | needs |\n| --- | --- |\n| `cpu` | nothing |\n\nmore\n")
    assert _documented_markers(page) == {"cpu"}


# A repository path in prose: a top folder of the checkout, then path characters.
_PATH = re.compile(r"(?<![\w./<-])((?:fp8ref|tests|docs|scripts|\.ci)/[\w./*-]*\w)")
# Paths that name what is not there on purpose: a placeholder in capitals (cuda-smXY.json,
# tests/scripts/NAME), a glob, or the CUDA golden a first GPU run pins (tests/golden/cuda-sm90.json).
_NOT_A_FILE = re.compile(r"[A-Z]{2,}|\*|^tests/golden/cuda-sm(\d+\.json)?$")


def stale_paths(files: list[Path]) -> list[str]:
    """``file:line: path`` for each repository path named in ``files`` that does not exist."""
    bad = []
    for f in files:
        for i, line in enumerate(f.read_text().splitlines(), 1):
            for m in _PATH.finditer(line):
                path = m.group(1).rstrip(".")
                if _NOT_A_FILE.search(path) or _exists(path):
                    continue
                bad.append(f"{f.relative_to(ROOT) if f.is_relative_to(ROOT) else f}:{i}: {path}")
    return bad


def _exists(path: str) -> bool:
    """A file or folder, or a module (``fp8ref/harness/distributed/fsdp_float8``), maybe with an attribute
    (``fp8ref/harness/gemm/scaled_mm_regressions.excess``)."""
    module = path.rsplit(".", 1)[0] if not (ROOT / path).exists() else path
    return any((ROOT / p).exists() for p in (path, path + ".py", module, module + ".py"))


def _prose_and_code() -> list[Path]:
    """The docs, .ci/run, the scripts, and every Python file (its docstrings and comments)."""
    found = [ROOT / "README.md", ROOT / "gpu_markers.md", ROOT / ".ci" / "run", *sorted((ROOT / "docs").glob("*.md"))]
    found += sorted((ROOT / "scripts").glob("*"))
    for top in ("fp8ref", "tests"):
        found += sorted(p for p in (ROOT / top).rglob("*") if p.suffix in (".py", ".md"))
    found += [ROOT / "conftest.py", ROOT / "pyproject.toml", ROOT / "pytest.ini"]
    return [p for p in found if p.is_file() and p != Path(__file__).resolve()]  # (this file names stale ones)


def test_every_repository_path_named_in_docs_and_code_exists():
    bad = stale_paths(_prose_and_code())
    assert not bad, "named but not in the checkout:\n" + "\n".join(bad)


def test_the_path_check_sees_a_stale_path(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "see tests/plugin.py and tests/plugins/beside.py, tests/golden/cuda-sm90.json, tests/scripts/NAME\n"
    )
    found = [line.split(": ")[1] for line in stale_paths([page]) if ": " in line]
    assert found == ["tests/plugin.py"], found
