"""Delayed scaling: TransformerEngine's form and the delayed-scaling design's per-weight meta, and the
autocast-style context that routes F.linear of an unmodified model through emulated FP8."""

import math

import pytest
import torch

from fp8ref.harness.oracles.delayed_scaling import delayed_mismatch
from fp8ref.reference.delayed import DelayedScaling, Fp8State, TensorMeta, te_scale
from fp8ref.reference.emulate import fp8_autocast, fp8_linear
from fp8ref.reference.formats import E4M3FN, E5M2
from fp8ref.reference.quantize import quantize_with_scale
from fp8ref.reference.scaling import amax_to_scale

T = torch.tensor


def _s(a, fmt=E4M3FN, margin=0):
    return amax_to_scale(T(float(a)), fmt, margin=margin).item()


def test_te_delayed_scale_comes_from_earlier_steps():
    ds = DelayedScaling(E4M3FN, history_len=4, algo="max")
    assert ds.scale.item() == 1.0  # before any amax
    assert ds.update(2.0).item() == _s(2.0)
    ds.update(8.0)
    ds.update(1.0)
    assert ds.scale.item() == _s(8.0)  # max over the window
    assert ds.amax_history.tolist() == [1.0, 8.0, 2.0, 0.0]  # most recent first


def test_te_most_recent_and_window_length():
    ds = DelayedScaling(E4M3FN, history_len=2, algo="most_recent")
    ds.update(8.0)
    assert ds.update(1.0).item() == _s(1.0)
    mx_ = DelayedScaling(E4M3FN, history_len=2, algo="max")
    for a in (8.0, 1.0, 1.0):
        mx_.update(a)
    assert mx_.scale.item() == _s(1.0)  # 8.0 has left the 2-step window


def test_te_margin_and_interval():
    ds = DelayedScaling(E5M2, history_len=3, margin=1, interval=2)
    ds.update(4.0)
    assert ds.scale.item() == 1.0  # not recomputed until the 2nd update
    ds.update(2.0)
    assert ds.scale.item() == _s(4.0, E5M2, margin=1)
    assert ds.scale_inv.item() == pytest.approx(1 / ds.scale.item())


@pytest.mark.parametrize("bad", [0.0, math.inf, math.nan])
@pytest.mark.parametrize("algo", ["max", "most_recent"])
def test_te_zero_inf_nan_amax_keeps_the_previous_scale(bad, algo):
    ds = DelayedScaling(E4M3FN, history_len=1, algo=algo)
    before = ds.update(3.0).item()
    assert ds.update(bad).item() == before
    assert ds.update(5.0).item() == _s(5.0)  # recovers once the bad amax leaves the window


def test_design_meta_refreshes_weight_scale_from_its_window():
    meta = TensorMeta(window=3)
    assert meta.amax_history.tolist() == [1.0, 1.0, 1.0] and meta.w_scale.item() == 1.0
    for a in (0.5, 4.0, 0.25):
        meta.record(a)
    assert meta.w_scale.item() == 1.0  # nothing until refresh
    meta.refresh()
    assert meta.w_scale.item() == _s(4.0)
    meta.record(math.inf)
    meta.refresh()
    assert meta.w_scale.item() == _s(4.0)  # inf amax keeps the previous scale


def test_design_activation_and_gradient_scales_lag_one_call():
    meta = TensorMeta()
    meta.update_x(2.0)
    assert meta.x_scale.item() == _s(2.0)
    for bad in (0.0, math.nan, math.inf):
        meta.update_x(bad)
        meta.update_g(bad)
    assert meta.x_scale.item() == _s(2.0) and meta.g_scale.item() == 1.0


def test_state_keys_metas_by_weight_identity_and_refreshes_every_interval():
    st = Fp8State(update_interval=2)
    w1, w2 = torch.ones(3, 4), torch.ones(3, 4)
    assert st.meta_for(w1) is st.meta_for(w1) and st.meta_for(w1) is not st.meta_for(w2)
    st.meta_for(w1).record(8.0)
    st.step()
    assert st.meta_for(w1).w_scale.item() == 1.0
    st.step()
    assert st.meta_for(w1).w_scale.item() == _s(8.0)
    st.reset()
    assert not st.metas and st.step_count == 0


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))


def test_autocast_routes_linear_through_delayed_fp8():
    model, st = _model(), Fp8State(update_interval=4)
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(1)) * 3
    ref = model(x)
    with fp8_autocast(state=st):
        y = model(x)
    assert len(st.metas) == 2 and st.step_count == 1
    first = st.meta_for(model[0].weight)
    assert first.x_scale.item() == _s(x.abs().max().item())  # recorded for the next call

    # the first call of each layer uses scale 1 for x and w (the design's initial state)
    def lin(a, layer):
        q = lambda t: quantize_with_scale(t, 1.0, E4M3FN).dequantize()  # noqa: E731
        return q(a) @ q(layer.weight).t() + layer.bias

    expected = lin(torch.relu(lin(x, model[0])), model[2])
    assert torch.equal(y, expected) and not torch.equal(y, ref)
    with fp8_autocast(enabled=False, state=st):
        assert torch.equal(model(x), ref)  # disabled: F.linear untouched
    assert torch.equal(model(x), ref)  # outside: untouched


def test_autocast_backward_updates_gradient_scales_and_matches_grad_shapes():
    model, st = _model(), Fp8State()
    x = torch.randn(4, 5, 32, generator=torch.Generator().manual_seed(2), requires_grad=True)
    with fp8_autocast(state=st):
        loss = model(x).square().mean()
    loss.backward()
    assert x.grad.shape == x.shape and model[0].weight.grad.shape == model[0].weight.shape
    assert model[0].bias.grad is not None
    assert all(m.g_scale.item() != 1.0 for m in st.metas.values())


def test_fp8_linear_matches_hand_quantized_reference():
    gen = torch.Generator().manual_seed(3)
    x, w, b = torch.randn(6, 32, generator=gen), torch.randn(16, 32, generator=gen), torch.randn(16, generator=gen)
    from fp8ref.reference.quantize import quantize

    xd = quantize(x, E4M3FN).dequantize()
    wd = quantize(w, E4M3FN).dequantize()
    assert torch.equal(fp8_linear(x, w, b), xd @ wd.t() + b)
    with pytest.raises(ValueError, match="w: expected shape"):
        fp8_linear(x, w.t())
    with pytest.raises(TypeError, match="state: expected an Fp8State"):
        with fp8_autocast(state=object()):
            pass


def test_bad_delayed_arguments():
    with pytest.raises(ValueError, match="algo"):
        DelayedScaling(algo="mean")
    with pytest.raises(ValueError, match="history_len"):
        DelayedScaling(history_len=0)
    with pytest.raises(ValueError, match="amax: expected one value"):
        DelayedScaling().update(torch.ones(2))
    with pytest.raises(TypeError, match="amax: expected a float tensor"):
        DelayedScaling().update("1")
    with pytest.raises(ValueError, match="update_interval"):
        Fp8State(update_interval=0)


def test_fp8_linear_backward_quantizes_the_output_gradient_to_e5m2():
    from fp8ref.reference.quantize import quantize

    gen = torch.Generator().manual_seed(4)
    x = torch.randn(3, 6, 32, generator=gen).requires_grad_()
    w = torch.randn(16, 32, generator=gen).requires_grad_()
    b = torch.randn(16, generator=gen).requires_grad_()
    g = torch.randn(3, 6, 16, generator=gen)
    fp8_linear(x, w, b).backward(g)
    qdq = lambda t, f: quantize(t.detach(), f).dequantize()  # noqa: E731
    gd, xd, wd = qdq(g, E5M2), qdq(x, E4M3FN), qdq(w, E4M3FN)
    assert torch.equal(x.grad, gd @ wd)
    assert torch.equal(w.grad, gd.reshape(-1, 16).t() @ xd.reshape(-1, 32))
    # the bias add is not an FP8 GEMM: its gradient is the high-precision output gradient, summed
    assert torch.equal(b.grad, g.reshape(-1, 16).sum(0))


# --- TransformerEngine's scale arithmetic against torchao's ------------------------------------
def _te_as_torch_evaluates_it(amax, previous, fmax, margin):
    """TE's documented rule, ``sf = (fp8_max / amax) / 2**margin`` with its three fix-ups, written
    with torch's own float32 operators (so a change in how torch evaluates ``float / tensor``
    shows up here as a one-ulp change in TE's scales)."""
    sf = (fmax / amax) / (2**margin)
    sf = torch.where(amax > 0.0, sf, previous)
    sf = torch.where(torch.isfinite(amax), sf, previous)
    return torch.where(torch.isinf(sf), torch.full_like(sf, torch.finfo(torch.float32).max), sf)


@pytest.mark.parametrize("fmt", [E4M3FN, E5M2], ids=str)
@pytest.mark.parametrize("margin", [0, 1, 3])
def test_te_scale_is_tes_formula_as_torch_evaluates_it(fmt, margin):
    g = torch.Generator().manual_seed(margin)
    amax = torch.cat(
        [
            torch.exp2(torch.empty(200_000).uniform_(-140, 127, generator=g)),
            torch.tensor([0.0, -1.0, float("inf"), float("nan"), 1e-45, 1e-38, 3.4e38, 1e-12, 1.0]),
        ]
    )
    previous = torch.full_like(amax, 0.75)
    assert torch.equal(
        te_scale(amax, previous, fmt, margin), _te_as_torch_evaluates_it(amax, previous, fmt.max, margin)
    )


def test_te_and_torchao_scales_differ_by_one_ulp_at_most_above_the_eps():
    """1e-12 <= amax < 2^126: TE rounds twice (reciprocal, then times fp8_max), torchao once, so
    they are equal or one float32 ulp apart (measured: about a quarter of 200,000 amax values
    differ). Above 2^126 TE's reciprocal is a float32 subnormal and loses more: 2 ulps seen."""
    g = torch.Generator().manual_seed(0)
    amax = torch.exp2(torch.empty(200_000).uniform_(-39.8, 127, generator=g))
    te = te_scale(amax, torch.ones(()), E4M3FN)
    ao = amax_to_scale(amax, E4M3FN)
    ulps = (te.view(torch.int32).long() - ao.view(torch.int32).long()).abs()
    normal = amax < 2.0**126
    assert int(ulps[normal].max()) == 1
    share = float((ulps[normal] == 1).float().mean())
    assert 0.05 < share < 0.5, share
    assert int(ulps[~normal].max()) >= 2


def test_te_and_torchao_scales_below_the_eps_and_at_the_ends():
    tiny = torch.tensor([1e-13, 1e-20, 1e-37, 1e-40, 1e-45])
    te = te_scale(tiny, torch.ones(()), E4M3FN)
    ao = amax_to_scale(tiny, E4M3FN)
    assert bool((ao == torch.tensor(448.0 / 1e-12, dtype=torch.float64).float()).all())  # the eps clamp
    assert bool((te > ao).all())
    assert te[-2:].tolist() == [torch.finfo(torch.float32).max] * 2  # 448 / amax overflows float32
    # amax 0, inf, NaN: TE keeps the previous scale
    prev = torch.tensor(3.0)
    assert te_scale(torch.tensor([0.0, float("inf"), float("nan")]), prev, E4M3FN).tolist() == [3.0] * 3


@pytest.mark.parametrize("rule", ["te", "torchao"])
def test_delayed_scaling_keeps_the_previous_scale_for_a_bad_amax_under_either_rule(rule):
    ds = DelayedScaling(E4M3FN, history_len=1, algo="most_recent", rule=rule)
    ds.update(2.0)
    good = ds.scale.clone()
    for bad in (0.0, float("inf"), float("nan")):
        ds.update(bad)
        assert torch.equal(ds.scale, good), bad
    with pytest.raises(ValueError, match="rule"):
        DelayedScaling(rule="deepseek")


@pytest.mark.parametrize("algo", ["max", "most_recent"])
@pytest.mark.parametrize("margin", [0, 2])
def test_delayed_scaling_follows_its_window(algo, margin):
    """fp8ref's DelayedScaling against the oracle in fp8ref/harness/oracles/delayed_scaling.py (the same check
    tests/meta feeds a broken implementation): a spike, a quiet stretch longer than the window,
    a zero and an inf."""
    amaxes = [1.0, 3.0, 250.0, 2.0, 2.5, 1.5, 0.5, 0.25, 0.0, 4.0, float("inf"), 1.0, 0.75]
    problem = delayed_mismatch(
        lambda: DelayedScaling(E4M3FN, history_len=4, algo=algo, margin=margin), amaxes, E4M3FN, 4, algo, margin
    )
    assert problem is None, problem
