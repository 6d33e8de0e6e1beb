"""The docs and the code that defines what they describe do not drift apart: every marker that
pytest.ini declares (its one definition) is explained in docs/markers.md or gpu_markers.md, and
those pages explain no marker that does not exist."""

import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _declared_markers() -> set[str]:
    ini = configparser.ConfigParser()
    ini.read(ROOT / "pytest.ini")
    lines = ini["pytest"]["markers"].strip().splitlines()
    return {re.match(r"\s*(\w+)", line).group(1) for line in lines if line.strip()}


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
