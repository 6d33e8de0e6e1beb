"""fp8_parity.py's five CPU smoke checks (its --smoke mode), as tests.

Check (2) was written assuming an unscaled E4M3 cast of 1000 gives NaN; torch 2.13+ saturates it
to 448 instead (docs/version-matrix.md). What holds on every version is asserted (each value
becomes what one of the two overflow rules gives it, the same rule for all), and which rule this
install follows is reported in the summary.
"""

import torch

from fp8ref.harness.gemm.mlp_problem import mlp_regression_problem, train_mlp
from fp8ref.reference.formats import E4M3FN, E5M2
from fp8ref.reference.quantize import quantize, quantize_with_scale
from fp8ref.reference.scaling import amax_to_scale, tile


def test_smoke_1_ranges_and_scaled_round_trip_bounds():
    assert torch.finfo(torch.float8_e4m3fn).max == E4M3FN.max == 448.0
    assert torch.finfo(torch.float8_e5m2).max == E5M2.max == 57344.0
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0)) * 3.0
    for fmt in (E4M3FN, E5M2):
        q = quantize(x, fmt)
        normal = (x * q.scale).abs() >= fmt.min_normal
        rel = ((q.dequantize() - x).abs() / x.abs())[normal].max().item()
        # 2^-(m+1), plus 2^-22 for the float32 multiply/divide by a non-power-of-two scale
        assert rel <= 2.0 ** -(fmt.man_bits + 1) + 2.0**-22, f"{fmt}: {rel}"


def test_smoke_2_unscaled_out_of_range_casts_saturate_or_give_nan(record_observation):
    """Values past E4M3FN's max (448) cast without a scale: by the format's overflow rules each
    becomes +-448 with its own sign (saturate) or NaN (nonsaturate: E4M3FN has no inf), one rule
    for all. Which rule is implementation-defined and recorded; anything else (a wrong sign, a
    finite value other than +-448) fails. The cast conformance tests
    (tests/cpu/install/test_cast_conformance.py) hold every overflowing input to the same rules."""
    big = torch.tensor([1000.0, -600.0, 500.0])
    plain = big.to(torch.float8_e4m3fn).float()
    saturated = torch.sign(big) * E4M3FN.max
    outcome = "saturate" if torch.equal(plain, saturated) else "nan" if bool(torch.isnan(plain).all()) else None
    record_observation(
        f"smoke check 2: unscaled e4m3fn cast of {big.tolist()} (torch {torch.__version__})",
        f"{outcome or 'neither rule'} -> {plain.tolist()}",
    )
    assert outcome is not None, (
        f"unscaled e4m3fn cast of {big.tolist()}: expected {saturated.tolist()} (saturate) or all NaN "
        f"(nonsaturate), got {plain.tolist()} (torch {torch.__version__})"
    )


def test_smoke_3_delayed_scaling_misses_a_spike_current_scaling_keeps_it():
    gen = torch.Generator().manual_seed(0)
    history = [torch.randn(1024, generator=gen).abs().max() for _ in range(16)]
    act = torch.randn(1024, generator=gen)
    act[3] = 40.0
    delayed = quantize_with_scale(act, amax_to_scale(torch.stack(history).max(), E4M3FN), E4M3FN).dequantize()
    current = quantize(act, E4M3FN).dequantize()
    assert abs(delayed[3].item() - 40.0) >= 1.0, f"delayed scaling kept the spike: {delayed[3].item()}"
    assert abs(current[3].item() - 40.0) <= 40.0 * 2**-4


def test_smoke_4_tiles_keep_normal_rows_accurate_next_to_an_outlier_row():
    a = torch.randn(8, 128, generator=torch.Generator().manual_seed(0)) * 0.01
    a[0] *= 1e4
    err_tensor = ((quantize(a, E4M3FN).dequantize() - a)[1:] ** 2).mean().item()
    err_tile = ((quantize(a, E4M3FN, tile(128)).dequantize() - a)[1:] ** 2).mean().item()
    assert err_tile < err_tensor, (err_tile, err_tensor)


def test_smoke_5_emulated_fp8_mlp_trains_within_10_percent_of_fp32(record_observation):
    X, Y, W1, W2 = mlp_regression_problem()
    initial = ((torch.relu(X @ W1.T) @ W2.T - Y) ** 2).mean().item()
    l32, l8 = train_mlp(False)[-1], train_mlp(True)[-1]
    gap = abs(l8 - l32) / l32
    record_observation(
        "smoke check 5: MLP loss initial / fp32 / emulated fp8 after 300 steps (gap)",
        f"{initial:.5f} / {l32:.5f} / {l8:.5f} ({gap:.2%})",
    )
    assert l8 < 0.5 * initial, "the FP8 run did not train"
    assert gap < 0.10, f"fp32 {l32}, fp8 {l8}: gap {gap:.2%} >= 10%"
