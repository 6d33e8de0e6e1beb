"""A library that wraps every module's forward, as ``kernels`` does under transformers (its frame
sits between the user's line and the op, and it may call an FP8 op itself on the module's
behalf), must move no call site out of the program's own lines: a stand-in installed beside torch
(a ``site-packages`` folder of its own, under a name no list of libraries holds) wraps
``nn.Module.__call__`` while shipped workloads are traced, and each trace must still pass its
workload's check (``workloads.check``: every call site a line of the workload's module). The tracer
once knew machinery by five package names and named the wrapper's line instead. Where the wrapper
is no installed library at all (a folder on ``sys.path``), the tracer takes it for the user's
code, but a shipped workload's trace (``workloads.traced``) counts its own folder alone as the
user's, and stays clean."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch

from fp8ref.harness.trace import Trace, call_site, trace
from fp8ref.harness.workloads import WORKLOADS, check
from fp8ref.harness.workloads.base import source_file
from fp8ref.harness.workloads.traced import _traced

WRAPPER = "hubwrap"
# kernels' use_kernel_forward_from_hub in small: the module's forward runs through the hub's
# frame, and with CAST set the hub quantizes each floating input itself (a kernel choosing by the
# input's float8 codes): the op's innermost frame outside torch is then the wrapper's own
_SOURCE = """
import torch

_call = torch.nn.Module.__call__
_FLOATS = (torch.float32, torch.bfloat16, torch.float16)
CAST = False
calls = casts = 0


def hub_call(self, *args, **kwargs):
    global calls, casts
    calls += 1
    for a in args if CAST else ():
        if isinstance(a, torch.Tensor) and a.dtype in _FLOATS:
            a.detach().to(torch.float8_e4m3fn)
            casts += 1
    return _call(self, *args, **kwargs)
"""


def _wrapping(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The stand-in imported from ``folder`` and wrapping every module's forward, for a test."""
    (folder / WRAPPER).mkdir(parents=True)
    (folder / WRAPPER / "__init__.py").write_text(_SOURCE)
    monkeypatch.syspath_prepend(str(folder))
    call_site.forget()  # (what it worked out before the wrapper's folder was there)
    try:
        wrapper = importlib.import_module(WRAPPER)
        monkeypatch.setattr(torch.nn.Module, "__call__", wrapper.hub_call)
        yield wrapper
    finally:
        sys.modules.pop(WRAPPER, None)
        call_site.forget()


@pytest.fixture
def installed_wrapper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """Installed beside torch, as pip puts a library: ``.../lib/python3.X/site-packages``."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    yield from _wrapping(tmp_path / "venv" / "lib" / version / "site-packages", monkeypatch)


@pytest.fixture
def vendored_wrapper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """A folder of no install put on ``sys.path`` (a vendored copy, ``PYTHONPATH``)."""
    yield from _wrapping(tmp_path / "vendored", monkeypatch)


def _sites_outside(name: str, got: Trace) -> set[str]:
    own = source_file(WORKLOADS[name])
    return {r.site for r in got.records if not r.site.startswith(f"{own}:")}


# the transformers Llama accelerate drives, each forward wrapped as kernels wraps it (torchao's ops
# run below the wrapper's frame); modded-nanogpt's FP8 linear (its own forward calls its ops: the
# cheapest) with the wrapper's own casts
@pytest.mark.parametrize(("name", "cast"), [("accelerate_fp8", False), ("static_custom_op", True)])
def test_a_wrapper_installed_beside_torch_moves_no_call_site(name, cast, installed_wrapper, skip_if_refused):
    workload = WORKLOADS[name]
    skip_if_refused(workload.refusal("cpu"), f"the {name} workload ({workload.what})")
    installed_wrapper.CAST = cast
    got = trace(workload.run)
    assert installed_wrapper.calls > 0, "the wrapper was never on the stack"
    assert not cast or installed_wrapper.casts > 0, "the wrapper cast nothing itself"
    assert check(workload, got) is None, check(workload, got)
    assert not _sites_outside(name, got)


def test_a_shipped_workloads_trace_names_its_own_lines_whatever_library_wraps_it(vendored_wrapper, skip_if_refused):
    name = "static_custom_op"
    skip_if_refused(WORKLOADS[name].refusal("cpu"), f"the {name} workload")
    vendored_wrapper.CAST = True
    # (a folder of no install is the user's code to the tracer: its cast is named at its line)
    assert any(WRAPPER in site for site in _sites_outside(name, trace(WORKLOADS[name].run)))
    got = _traced_afresh(name)
    assert check(WORKLOADS[name], got) is None, check(WORKLOADS[name], got)


def _traced_afresh(name: str) -> Trace:
    """What ``workloads.traced`` computes for ``name`` on the CPU, past its once-per-process cache
    (which the other tests' traces share and must not hold this wrapped run)."""
    return _traced.__wrapped__(name, "cpu")
