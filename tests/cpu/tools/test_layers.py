"""The package's layers, checked: the reference never reaches what it checks.

Each layer is a folder of fp8ref, and a module's layer is the folder it sits in:

fp8ref.reference    torch and the standard library only; imports nothing else of fp8ref
fp8ref.harness      the reference, torch, the implementations under test and the oracles (torchao,
                    transformers' FP8 integration in harness/hf only, safetensors, ml_dtypes,
                    gfloat, numpy); never the application
fp8ref.finetune, fp8ref.__main__
                    the application: anything (the only layer that may import datasets,
                    matplotlib or tqdm, and transformers outside harness/hf)
fp8ref (__init__)   the package root: re-exports reference names, lazily

Imports are read from the source (``ast``), so a lazy import inside a function counts. Beyond
imports, the independence rule is checked on the code, not the comments: no reference module
touches a native ``float8_*`` dtype or ``_scaled_mm``, except ``quantize``'s opt-in
``cast="native"`` path, which exists to reproduce torchao end to end and is never the default.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest

from tests.common.paths import PACKAGE

# layer -> the module-name prefixes (relative to fp8ref) that belong to it
LAYERS = {"reference": ("reference.",), "harness": ("harness.",), "application": ("finetune", "__main__")}
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
NATIVE_FP8_OK = {("reference.quantize", "_cast")}  # cast="native": opt-in, documented, never the default


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
    return {_module_name(p): ast.parse(p.read_text(), filename=str(p)) for p in sorted(PACKAGE.rglob("*.py"))}


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


@functools.cache
def native_fp8_uses(name: str, tree: ast.Module) -> tuple[str, ...]:
    """Places in ``tree``'s code (not comments or docstrings) that touch a native float8 dtype or
    ``_scaled_mm``, or ask a format for its torch dtype, as ``module.function:line``."""
    found = []

    def visit(node: ast.AST, func: str) -> None:
        for child in ast.iter_child_nodes(node):
            f = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            bad = None
            if isinstance(child, ast.Attribute) and (
                child.attr.startswith("float8_") or child.attr in ("_scaled_mm", "torch_dtype")
            ):
                bad = child.attr
            elif (
                isinstance(child, ast.Constant)
                and isinstance(child.value, str)
                and child.value.startswith("float8_")
                and isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "getattr"
            ):
                bad = child.value  # getattr(torch, "float8_...")
            if bad and (name, f) not in NATIVE_FP8_OK:
                found.append(f"{name}.{f}:{getattr(child, 'lineno', '?')} uses {bad}")
            visit(child, f)

    visit(tree, "<module>")
    return tuple(found)


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
            if imp in STDLIB or imp == "torch":
                continue
            if imp == "transformers" and name.startswith("harness.hf."):
                continue  # transformers' FP8 code is an implementation under test there
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
        ("def f():\n    import matplotlib\n", "imports matplotlib, which only the application may"),
        ("from fp8ref.finetune import train\n", "imports fp8ref.finetune (application)"),
        ("def enc(x):\n    return x.to(torch.float8_e4m3fn)\n", "enc:2 uses float8_e4m3fn"),
        ("def mm(a, b):\n    return torch._scaled_mm(a, b)\n", "mm:2 uses _scaled_mm"),
        ("def g(fmt):\n    return getattr(torch, 'float8_e5m2')\n", "g:2 uses float8_e5m2"),
    ],
)
def test_the_layer_check_catches_a_violation(source, expect):
    """The check itself can fail: a reference module given each forbidden import or call."""
    modules = _modules()
    modules["reference.codec"] = ast.parse(source)
    bad = layer_violations(modules)
    assert any(expect in line for line in bad), bad


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
