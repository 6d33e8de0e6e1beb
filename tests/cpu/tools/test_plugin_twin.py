"""A team's module check from its own suite, through fp8ref's pytest plugin alone (fp8ref
installed, no checkout, no conftest): ``--fp8-claims=pkg.fp8_claims:results`` whose ``results()``
returns ``check_module``'s results runs the module check (a planted bug fails it naming the
submodule and the team's line), and with ``--fp8-golden`` its keys join the team's golden, one
per module and lifecycle event, valued with the error as a bucketed fraction of its bound."""

import json
import re

import pytest

from fp8ref.harness.twin import EVENTS
from tests.common.beside import pytest_each, pytest_each_result

pytestmark = [pytest.mark.cpu]

TEAM = """import torch

from fp8ref.harness.twin import ModuleCheck, Recipe, check_module
from fp8ref.harness.twin.examples import linear_twin, mlp

LIMIT = {limit}


def cast(t, dtype):
    amax = t.detach().abs().max().float().clamp(min=1e-12)
    scale = torch.finfo(dtype).max / amax
    lim = LIMIT if dtype == torch.float8_e4m3fn else torch.finfo(dtype).max
    return (t.float() * scale).clamp(-lim, lim).to(dtype), 1 / scale  # the team's cast


class Mm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        (xq, xs), (wq, ws) = cast(x, torch.float8_e4m3fn), cast(w, torch.float8_e4m3fn)
        ctx.save_for_backward(xq, xs, wq, ws)
        return torch._scaled_mm(xq, wq.t(), scale_a=xs, scale_b=ws, out_dtype=torch.float32)

    @staticmethod
    def backward(ctx, g):
        xq, xs, wq, ws = ctx.saved_tensors
        gq, gs = cast(g, torch.float8_e5m2)
        gx = torch._scaled_mm(gq, wq.t().contiguous().t(), scale_a=gs, scale_b=ws, out_dtype=torch.float32)
        xc = xq.t().contiguous().t()
        gw = torch._scaled_mm(gq.t().contiguous(), xc, scale_a=gs, scale_b=xs, out_dtype=torch.float32)
        return gx, gw


class Fp8Linear(torch.nn.Module):
    def __init__(self, linear):
        super().__init__()
        self.weight = linear.weight

    def forward(self, x):
        return Mm.apply(x, self.weight)


def make(seed):
    model = mlp(seed)
    model[0], model[2] = Fp8Linear(model[0]), Fp8Linear(model[2])
    return model


def results():
    return check_module(ModuleCheck("team mlp", make, linear_twin, Recipe()))
"""


def run_beside(folder):
    runs = {}
    for name, limit in (("good", "448.0"), ("bad", "240.0")):
        pkg = folder / name / f"fp8team_twin_{name}"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "fp8_claims.py").write_text(TEAM.format(limit=limit))
        (folder / name / "ci").mkdir()
        target = f"--fp8-claims=fp8team_twin_{name}.fp8_claims:results"
        cwd = str(folder / name)
        runs[name] = {"argv": [target, "-rA", "-p", "no:cacheprovider", "-p", "no:randomly"], "cwd": cwd}
        if name == "good":
            pin = [target, "--fp8-golden=ci/fp8.json", "--fp8-update-golden", "-p", "no:cacheprovider"]
            runs["pin"] = {"argv": pin, "cwd": cwd}
            runs["held"] = {"argv": [target, "--fp8-golden=ci/fp8.json", "-rA", "-p", "no:cacheprovider"], "cwd": cwd}
    return {"runs": pytest_each(runs), "folder": ["true", str(folder)]}


@pytest.fixture
def runs(beside):
    done = beside("runs")
    return lambda name: pytest_each_result(done, name)


def test_a_teams_module_check_runs_from_its_own_suite(runs):
    good = runs("good")
    assert good.returncode == 0 and "1 passed" in good.stdout, good.stdout[-3000:] + good.stderr[-2000:]


def test_a_planted_bug_fails_naming_the_submodule_and_the_teams_line(runs):
    bad = runs("bad")
    assert bad.returncode == 1, bad.stdout[-3000:]
    found = re.search(r"submodule '(\w+)', (\w[\w ]*): error \S+ where its bound allows \S+", bad.stdout)
    assert found and found.group(1) == "0", bad.stdout[-3000:]
    assert re.search(r"fp8team_twin_bad/fp8_claims\.py:\d+", bad.stdout), bad.stdout[-3000:]


def test_its_keys_join_the_teams_golden_one_per_event(runs, beside):
    pin, held = runs("pin"), runs("held")
    assert pin.returncode == 0, pin.stdout[-3000:] + pin.stderr[-2000:]
    assert held.returncode == 0 and "PASSED" in held.stdout, held.stdout[-3000:]
    folder = beside("folder").args[-1]
    golden = json.loads(open(f"{folder}/good/ci/fp8.json").read())
    keys = {k: v for k, v in golden["behaviour"].items() if k.startswith("claim.")}
    assert len(keys) == len(EVENTS), keys
    assert all(re.fullmatch(r"passed, error (0|<= (1|1/\d+) of its bound)", v) for v in keys.values()), keys
