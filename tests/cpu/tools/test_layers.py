"""The package's layers, checked: the reference never reaches what it checks.

Each layer is a folder of fp8ref, and a module's layer is the folder it sits in:

fp8ref.reference    torch and the standard library only; imports nothing else of fp8ref
fp8ref.harness      the reference, torch, the implementations under test and the oracles (torchao,
                    transformers' FP8 integration in harness/hf only, accelerate's FP8 path in
                    harness/workloads/accelerate_fp8 only, hypothesis in harness/claims
                    only, safetensors, ml_dtypes, gfloat, numpy); never the application
fp8ref.finetune, fp8ref.__main__, fp8ref.pytest_plugin, fp8ref.pytest_golden
                    the application: anything (pytest only in the pytest plugin, pytest_plugin,
                    which pytest loads through the package's entry point, and its golden half
                    pytest_golden) (the only layer that may import datasets, matplotlib or tqdm,
                    and transformers outside harness/hf)
fp8ref (__init__)   the package root: re-exports reference names, lazily

Imports are read from the source (``ast``), so a lazy import inside a function counts. Beyond
imports, the independence rule is checked on the code, not the comments: no reference module
touches a native ``float8_*`` dtype, any ``torch._scaled_*`` op or ``torch.nn.functional``'s
``scaled_mm`` / ``scaled_grouped_mm`` (as an attribute, an imported name or a constant handed to
``getattr``), asks a format for its torch dtype, or reaches into torch by a name computed at run
time (``getattr(torch, name)``, ``vars(torch)``, ``torch.__dict__``), which would hide any of
these. The exceptions are ``quantize``'s opt-in ``cast="native"`` path, which exists to reproduce
torchao end to end and is never the default, and ``FloatFormat.torch_dtype``, which finds a
format's torch dtype by name for the harness; their code is pinned here, so a change to either
fails, naming it, until it is reviewed and re-pinned.
"""

from __future__ import annotations

import ast
import functools
import sys
import textwrap
from pathlib import Path

import pytest

from tests.common.paths import PACKAGE

# layer -> the module-name prefixes (relative to fp8ref) that belong to it
LAYERS = {
    "reference": ("reference.",),
    "harness": ("harness.",),
    "application": ("finetune", "__main__", "pytest_plugin", "pytest_golden"),
}
# the plugin pytest loads through the entry point, and its golden half; nothing else imports them
PYTEST_ONLY_IN = ("pytest_plugin", "pytest_golden")
PACKAGE_ROOT = "__init__"  # re-exports reference names
FOLDER_INITS = {"reference", "harness"}  # the layer folders' own (empty) __init__ modules

ORACLES = {"torchao", "ml_dtypes", "gfloat", "numpy", "safetensors"}
APPLICATION_ONLY = {"transformers", "datasets", "matplotlib", "tqdm"}
# reference exceptions, each with its reason:
REFERENCE_EXTERNAL_OK = {
    (
        "reference.formats",
        "ml_dtypes",
    ),  # FloatFormat.ml_dtype(): the name of the matching ml_dtypes type, for the harness
}
# reference functions the native-FP8 rule exempts, each with its reason; their code is PINNED
NATIVE_FP8_OK = {
    ("reference.quantize", "_cast"),  # cast="native": opt-in, documented, never the default
    ("reference.formats", "torch_dtype"),  # a format's torch dtype by name, for the harness and _cast
}
# The exempt functions' code, exactly (``ast.get_source_segment``, dedented): new code inside one
# (another native call, a torch name computed at run time) passes the rule unseen, so any change
# fails test_the_exempt_functions_are_pinned, naming the function, until reviewed and re-pinned.
PINNED: dict[tuple[str, str], tuple[str, ...]] = {
    ("reference.quantize", "_cast"): (
        "def _cast(y: torch.Tensor, fmt: FloatFormat, cast: Cast, rounding: Rounding) -> torch.Tensor:",
        "    if cast == Cast.CODEC:",
        "        return encode(y, fmt, saturate=True, rounding=rounding)",
        "    if rounding != Rounding.RNE:",
        """        raise ValueError(f"rounding: cast='native' rounds to nearest only, got {rounding}")""",
        "    dtype = fmt.torch_dtype()",
        "    if dtype is None:",
        """        raise ValueError(f"cast: torch {torch.__version__} has no {fmt.torch_name} for cast='native'")""",
        "    return y.to(dtype).view(torch.uint8)",
    ),
    ("reference.formats", "torch_dtype"): (
        "def torch_dtype(self):",
        '    """The matching one-element-per-byte torch dtype (``torch.float8_*``), or ``None`` when',
        '    this torch lacks it or none exists (FP4 is only ``float4_e2m1fn_x2``, two per byte)."""',
        "    import torch",
        "",
        "    return getattr(torch, self.torch_name, None) if self.torch_name else None",
    ),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _package_parts(name: str) -> list[str]:
    """The package a module's relative imports start from ([] is fp8ref itself)."""
    parts = name.split(".")
    return parts if (PACKAGE / Path(*parts)).is_dir() else parts[:-1]


def _modules() -> dict[str, ast.Module]:
    """fp8ref's modules by name, parsed (a new dict each call; the trees are shared, and read only)."""
    return dict(_parsed())


@functools.cache
def _parsed() -> dict[str, ast.Module]:
    return {name: ast.parse(text, filename=name) for name, text in _sources().items()}


@functools.cache
def _sources() -> dict[str, str]:
    """fp8ref's modules' source text by module name."""
    return {_module_name(p): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}


@functools.cache  # (a tree hashes by identity: each parsed module is walked once per run)
def imports(name: str, tree: ast.Module) -> frozenset[str]:
    """Every module fp8ref module ``name`` imports: fp8ref's own as ``fp8ref.<module>``, others by
    their top-level package."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name if a.name.startswith("fp8ref") else a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            out.add(node.module if node.module.startswith("fp8ref") else node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            pkg = _package_parts(name)
            base = pkg[: len(pkg) - (node.level - 1)]
            if node.module:
                out.add(".".join(["fp8ref", *base, node.module]))
            else:  # from . import x, y: modules
                out |= {".".join(["fp8ref", *base, a.name]) for a in node.names}
    return frozenset(out)


def forbidden_name(name: str) -> bool:
    """A name the reference may not reach: a native float8 dtype, a ``torch._scaled_*`` op,
    ``torch.nn.functional.scaled_mm`` / ``scaled_grouped_mm``, or a format's torch dtype."""
    return name.startswith(("float8_", "_scaled_", "scaled_mm", "scaled_grouped_mm")) or name == "torch_dtype"


def _torch_names(tree: ast.Module) -> set[str]:
    """The names ``tree`` binds to torch or a module or name inside it (``import torch``,
    ``import torch.nn.functional as F``, ``from torch import nn``, ...)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] == "torch"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "torch":
            names |= {a.asname or a.name for a in node.names}
    return names


def _root(node: ast.AST) -> str | None:
    """The name an attribute chain, subscript or call starts from (``torch`` in ``torch.ops.aten.x``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


_REFLECTION = {"__dict__", "__getattribute__", "__getattr__"}


@functools.cache
def native_fp8_uses(name: str, tree: ast.Module) -> tuple[str, ...]:
    """Places in ``tree``'s code (not comments or docstrings) that reach a ``forbidden_name``, or
    reach into torch by a name computed at run time, as ``module.function:line``."""
    found = []
    torch_names = _torch_names(tree)

    def on_torch(node: ast.AST) -> bool:
        return _root(node) in torch_names

    def visit(node: ast.AST, func: str) -> None:
        for child in ast.iter_child_nodes(node):
            f = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            bad = None
            if isinstance(child, ast.Attribute) and forbidden_name(child.attr):
                bad = child.attr
            elif isinstance(child, ast.Attribute) and child.attr in _REFLECTION and on_torch(child.value):
                bad = f"torch's {child.attr}"
            elif isinstance(child, ast.ImportFrom) and any(forbidden_name(a.name) for a in child.names):
                bad = next(a.name for a in child.names if forbidden_name(a.name))
            elif isinstance(child, ast.Call) and getattr(child.func, "id", None) in ("getattr", "vars") and child.args:
                target, attr = child.args[0], child.args[1] if len(child.args) > 1 else None
                if isinstance(attr, ast.Constant) and isinstance(attr.value, str) and forbidden_name(attr.value):
                    bad = attr.value  # getattr(torch, "float8_...")
                elif on_torch(target) and child.func.id == "vars":  # type: ignore[attr-defined]
                    bad = "vars(torch)"
                elif on_torch(target) and not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
                    bad = "getattr(torch, <computed name>)"
            if bad and (name, f) not in NATIVE_FP8_OK:
                found.append(f"{name}.{f}:{getattr(child, 'lineno', '?')} uses {bad}")
            visit(child, f)

    visit(tree, "<module>")
    return tuple(found)


def pinned_changes(sources: dict[str, str]) -> list[str]:
    """One line per exempt function (``NATIVE_FP8_OK``) whose code differs from ``PINNED`` (or
    that has no pin, or is gone), showing its code now."""
    bad = []
    for module, func in sorted(NATIVE_FP8_OK):
        pin = PINNED.get((module, func))
        text = sources.get(module, "")
        nodes = [
            n
            for n in ast.walk(ast.parse(text))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == func
        ]
        now = [textwrap.dedent(ast.get_source_segment(text, n, padded=True) or "") for n in nodes]
        if pin is None or now != ["\n".join(pin)]:
            bad.append(
                f"fp8ref.{module}.{func}, exempt from the native-FP8 rule, differs from its pin in "
                f"tests/cpu/tools/test_layers.py (PINNED): review it (it may only do what its exemption "
                f"says), then re-pin it. Its code now:\n" + ("\n---\n".join(now) or "(no such function)")
            )
    return bad


def _layer(name: str) -> str:
    if name == PACKAGE_ROOT:
        return "root"
    if name in FOLDER_INITS:
        return name
    for layer, prefixes in LAYERS.items():
        if name.startswith(prefixes):
            return layer
    return "unassigned"


STDLIB = set(sys.stdlib_module_names) | {"__future__"}


def layer_violations(modules: dict[str, ast.Module]) -> list[str]:
    bad = []
    for name, tree in modules.items():
        layer = _layer(name)
        if layer == "unassigned":
            bad.append(
                f"fp8ref.{name} belongs to no layer: put it in fp8ref/reference, fp8ref/harness or fp8ref/finetune"
            )
            continue
        for imp in sorted(imports(name, tree)):
            if imp.startswith("fp8ref"):
                target = imp.removeprefix("fp8ref").lstrip(".") or PACKAGE_ROOT
                t_layer = _layer(target)
                if layer in ("reference", "root") and t_layer not in ("reference", "root"):
                    bad.append(f"fp8ref.{name} ({layer}) imports fp8ref.{target} ({t_layer})")
                if layer == "harness" and t_layer == "application":
                    bad.append(f"fp8ref.{name} (harness) imports fp8ref.{target} (application)")
                continue
            if imp == "pytest" and name not in PYTEST_ONLY_IN:
                bad.append(f"fp8ref.{name} imports pytest, which only fp8ref's pytest plugin may")
                continue
            if imp in STDLIB or imp == "torch":
                continue
            if imp == "transformers" and name.startswith("harness.hf."):
                continue  # transformers' FP8 code is an implementation under test there
            if imp in ("accelerate", "transformers") and name == "harness.workloads.accelerate_fp8":
                continue  # accelerate's FP8 path is the program under test there, on a transformers model
            if imp == "hypothesis" and name.startswith("harness.claims."):
                continue  # the inputs the claims adapter generates for a team's function (optional there)
            if imp in APPLICATION_ONLY and layer != "application":
                bad.append(f"fp8ref.{name} ({layer}) imports {imp}, which only the application may")
            elif layer in ("reference", "root") and (name, imp) not in REFERENCE_EXTERNAL_OK:
                bad.append(f"fp8ref.{name} ({layer}) imports {imp}")
            elif layer == "harness" and imp not in ORACLES:
                bad.append(f"fp8ref.{name} (harness) imports {imp}")
    for name, tree in modules.items():
        if _layer(name) in ("reference", "root"):
            bad += native_fp8_uses(name, tree)
    return bad


def test_every_module_keeps_to_its_layer():
    bad = layer_violations(_modules())
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "source,expect",
    [
        ("from ..harness.profiles.profile import collect\n", "imports fp8ref.harness.profiles.profile (harness)"),
        ("from fp8ref.harness import probes\n", "imports fp8ref.harness (harness)"),
        ("import torchao\n", "imports torchao"),
        ("import pytest\n", "imports pytest, which only fp8ref's pytest plugin may"),
        ("def f():\n    import matplotlib\n", "imports matplotlib, which only the application may"),
        ("from fp8ref.finetune import train\n", "imports fp8ref.finetune (application)"),
        ("def enc(x):\n    return x.to(torch.float8_e4m3fn)\n", "enc:2 uses float8_e4m3fn"),
        ("def mm(a, b):\n    return torch._scaled_mm(a, b)\n", "mm:2 uses _scaled_mm"),
        ("def g(fmt):\n    return getattr(torch, 'float8_e5m2')\n", "g:2 uses float8_e5m2"),
        # the indirect ways in: a name computed at run time, the other scaled GEMMs, their imports
        ("import torch\ndef g(n):\n    return getattr(torch, n)\n", "g:3 uses getattr(torch, <computed name>)"),
        ("import torch\ndef g():\n    return getattr(torch, 'float' + '8_e4m3fn')\n", "g:3 uses getattr(torch, <comp"),
        ("import torch as t\ndef g(n):\n    return getattr(t.ops.aten, n)\n", "g:3 uses getattr(torch, <comp"),
        ("import torch\ndef g(n):\n    return vars(torch)[n]\n", "g:3 uses vars(torch)"),
        ("import torch\ndef g(n):\n    return torch.__dict__[n]\n", "g:3 uses torch's __dict__"),
        ("import torch\ndef mm(a, b):\n    return torch.nn.functional.scaled_mm(a, b)\n", "mm:3 uses scaled_mm"),
        ("def mm(a, b):\n    return F.scaled_grouped_mm(a, b)\n", "mm:2 uses scaled_grouped_mm"),
        ("def mm(a, b):\n    from torch.nn.functional import scaled_mm\n", "mm:2 uses scaled_mm"),
        ("def mm(a, b):\n    return torch._scaled_grouped_mm(a, b)\n", "mm:2 uses _scaled_grouped_mm"),
        ("def mm(a, b):\n    return torch._scaled_mm_v2(a, b)\n", "mm:2 uses _scaled_mm_v2"),
        ("def mm(a, b):\n    return torch.ops.aten._scaled_mm.default(a, b)\n", "mm:2 uses _scaled_mm"),
        ("def mm(a, b):\n    return getattr(torch.ops.aten, '_scaled_mm')(a, b)\n", "mm:2 uses _scaled_mm"),
        ("def dt(fmt):\n    return fmt.torch_dtype()\n", "dt:2 uses torch_dtype"),
    ],
)
def test_the_layer_check_catches_a_violation(source, expect):
    """The check itself can fail: a reference module given each forbidden import or call."""
    modules = _modules()
    modules["reference.codec"] = ast.parse(source)
    bad = layer_violations(modules)
    assert any(expect in line for line in bad), bad


def test_the_exempt_functions_are_pinned():
    bad = pinned_changes(_sources())
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "change",
    [
        "    return y.to(dtype).view(torch.uint8)",  # (unchanged: the control)
        "    y = torch._scaled_mm(y, y.t())\n    return y.to(dtype).view(torch.uint8)",
        "    return y.to(getattr(torch, fmt.torch_name)).view(torch.uint8)",
    ],
    ids=["unchanged", "a scaled GEMM added", "a computed name"],
)
def test_new_code_in_the_exempt_cast_fails_naming_it(change):
    """The exemption covers ``quantize._cast`` whole, so the rule cannot see inside it: its pin can."""
    sources = dict(_sources())
    last = "    return y.to(dtype).view(torch.uint8)"
    assert last in sources["reference.quantize"]
    sources["reference.quantize"] = sources["reference.quantize"].replace(last, change)
    bad = pinned_changes(sources)
    if change == last:
        assert bad == []
    else:
        assert len(bad) == 1 and bad[0].startswith("fp8ref.reference.quantize._cast, exempt"), bad
        assert change.strip().splitlines()[0] in bad[0]


def test_an_exemption_without_a_pin_fails(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "NATIVE_FP8_OK", NATIVE_FP8_OK | {("reference.codec", "encode")})
    assert any(line.startswith("fp8ref.reference.codec.encode, exempt") for line in pinned_changes(_sources()))


def test_a_comment_or_docstring_is_not_a_call():
    tree = ast.parse('"""Never calls x.to(torch.float8_e4m3fn) or torch._scaled_mm."""\n# torch._scaled_mm\nX = 1\n')
    assert native_fp8_uses("codec", tree) == ()


def test_a_new_module_must_choose_a_layer():
    modules = _modules()
    modules["newthing"] = ast.parse("X = 1\n")
    assert "fp8ref.newthing belongs to no layer" in "\n".join(layer_violations(modules))


def test_a_module_takes_the_layer_of_its_folder():
    """The same import is allowed or not by where the module sits: torchao in the harness folder
    is an implementation under test, in the reference folder a violation."""
    modules = _modules()
    modules["harness.newprobe"] = ast.parse("import torchao\n")
    modules["reference.newrule"] = ast.parse("import torchao\n")
    bad = "\n".join(layer_violations(modules))
    assert "fp8ref.reference.newrule (reference) imports torchao" in bad
    assert "harness.newprobe" not in bad
