"""The catch rate over every fault family in tests/meta, in one place (no state is shared between
tests, so any order works): it goes into the end-of-run summary."""

from __future__ import annotations

import importlib.util

from fp8ref.harness.native import native_ops
from fp8ref.harness.stack import probes
from fp8ref.reference.formats import E4M3FN, E5M2
from tests.meta.test_autocast_faults import FAULTS as AUTOCAST_FAULTS
from tests.meta.test_autocast_faults import autocast_fault_caught
from tests.meta.test_block_fp8_faults import FAULTS as BLOCK_FP8_FAULTS
from tests.meta.test_block_fp8_faults import block_fp8_fault_caught
from tests.meta.test_bound_faults import FAULT as BOUND_FAULT
from tests.meta.test_bound_faults import GEMM_BOUNDS, quality_caught, tracer_caught
from tests.meta.test_cast_faults import CAST_FAULTS, cast_fault_caught
from tests.meta.test_checkpoint_faults import FAULTS as CHECKPOINT_FAULTS
from tests.meta.test_checkpoint_faults import checkpoint_fault_caught
from tests.meta.test_claim_faults import float16_kernel_caught, generated_inputs_caught, late_update_caught
from tests.meta.test_compiled_region_faults import compiled_fault_caught
from tests.meta.test_conversion_faults import FAULTS as CONVERSION_PARAM_FAULTS
from tests.meta.test_conversion_faults import conversion_param_fault_caught
from tests.meta.test_float8_conversion_faults import FAULTS as CONVERSION_FAULTS
from tests.meta.test_float8_conversion_faults import conversion_fault_caught
from tests.meta.test_fp8_layer_faults import FAULTS as LAYER_FAULTS
from tests.meta.test_fp8_layer_faults import layer_fault_caught
from tests.meta.test_fsdp_faults import FSDP_FAULTS, dcp_shard_fault_caught, fsdp_fault_caught
from tests.meta.test_grouped_gemm_faults import FAULTS as GROUPED_FAULTS
from tests.meta.test_grouped_gemm_faults import grouped_fault_caught
from tests.meta.test_input_space_faults import INPUT_SPACE_FAULTS
from tests.meta.test_linear_faults import PAD_FAULTS, pad_fault_caught
from tests.meta.test_mx_mode_faults import FAULTS as MX_MODE_FAULTS
from tests.meta.test_mx_mode_faults import mx_mode_fault_caught
from tests.meta.test_native_op_faults import FAULTS as NATIVE_OP_FAULTS
from tests.meta.test_native_op_faults import native_op_fault_caught
from tests.meta.test_optimizer_state_faults import FAULTS as STATE_FAULTS
from tests.meta.test_optimizer_state_faults import STEP_FAULTS, state_fault_caught, step_fault_caught
from tests.meta.test_scale_edge_faults import MX_FAULTS as MX_BOUNDARY_FAULTS
from tests.meta.test_scale_edge_faults import (
    POW2_FAULTS,
    POW2_SCALE_FAULTS,
    mx_boundary_fault_caught,
    pow2_fault_caught,
    pow2_scale_fault_caught,
)
from tests.meta.test_scale_faults import SCALE_FAULTS, delayed_fault_caught, recipe_fault_caught, scale_fault_caught
from tests.meta.test_scaled_mm_faults import MM_FAULTS, scaled_mm_excess
from tests.meta.test_scaled_mm_quality_faults import FAULTS as QUALITY_FAULTS
from tests.meta.test_scaled_mm_quality_faults import quality_fault_caught
from tests.meta.test_torchao_surface_faults import ADDED as ADDED_MEMBERS
from tests.meta.test_torchao_surface_faults import surface_fault_caught
from tests.meta.test_trace_faults import FAULTS as TRACE_FAULTS
from tests.meta.test_trace_faults import fault_refusal as trace_fault_refusal
from tests.meta.test_trace_faults import trace_fault_caught
from tests.meta.test_trace_write_faults import write_fault_caught
from tests.meta.test_uneven_shard_faults import FAULTS as UNEVEN_FAULTS
from tests.meta.test_uneven_shard_faults import uneven_fault_caught
from tests.meta.test_workload_check_faults import workload_check_faults_caught
from tests.meta.test_workload_faults import WORKLOADS, dispatch_fault_caught, workload_fault_caught


def test_the_catch_rate_over_every_injected_fault(record_observation):
    """Every fault of the families above, again."""
    results = {f"cast {fmt.name}: {f}": cast_fault_caught(f, fmt) for fmt in (E4M3FN, E5M2) for f in CAST_FAULTS}
    results |= {f"scale: {f}": scale_fault_caught(f) for f in SCALE_FAULTS}
    results["recipe: E4M3 gradients"] = recipe_fault_caught()
    results["delayed: latest amax instead of the window max"] = delayed_fault_caught()
    results["a team's quantize kernel: rounds through float16 first"] = float16_kernel_caught()
    results["a team's delayed-scaling update: reads the history before recording the amax"] = late_update_caught()
    if importlib.util.find_spec("hypothesis") is not None:  # (the generated case is not run without it)
        results["a team's kernel and update wrong only where hypothesis's inputs reach"] = generated_inputs_caught()
    results |= {f"_scaled_mm: {f}": scaled_mm_excess(f) is not None for f in MM_FAULTS}
    results |= {f"_scaled_mm quality bound: {f}": quality_fault_caught(f) for f in QUALITY_FAULTS}
    results |= {f"FSDP float8 all-gather: {f}": fsdp_fault_caught(f) for f in FSDP_FAULTS}
    results["FSDP2 through DCP: a shard lost"] = dcp_shard_fault_caught()
    results |= {f"grouped GEMMs: {f}": grouped_fault_caught(f) for f in GROUPED_FAULTS}
    results |= {f"transformers' FP8 layers: {f}": layer_fault_caught(f) for f in LAYER_FAULTS}
    results |= {f"input space: {f}": check() for f, check in INPUT_SPACE_FAULTS.items()}
    results |= {f"MX scale modes: {f}": mx_mode_fault_caught(f) for f in MX_MODE_FAULTS}
    results |= {f"float8 to float8: {f}": conversion_fault_caught(f) for f in CONVERSION_FAULTS}
    results |= {f"FP8 optimizer state: {f}": state_fault_caught(f) for f in STATE_FAULTS}
    results |= {f"FP8 optimizer step: {f}": step_fault_caught(f) for f in STEP_FAULTS}
    results |= {f"pow2 scale rounding: {f}": pow2_fault_caught(f) for f in POW2_FAULTS}
    results |= {f"pow2 scale of an amax: {f}": pow2_scale_fault_caught(f) for f in POW2_SCALE_FAULTS}
    results |= {f"MX scales at the amax boundaries: {f}": mx_boundary_fault_caught(f) for f in MX_BOUNDARY_FAULTS}
    results |= {f"FSDP2 uneven shards: {f}": uneven_fault_caught(f) for f in UNEVEN_FAULTS}
    results |= {f"autocast: {f}": autocast_fault_caught(f) for f in AUTOCAST_FAULTS}
    results |= {f"FP8 block checkpoints: {f}": block_fp8_fault_caught(f) for f in BLOCK_FP8_FAULTS}
    results |= {f"the tracer: {f}": trace_fault_caught(f) for f in TRACE_FAULTS if trace_fault_refusal(f) is None}
    results["the tracer: an index_put_ into float8 that changes a code it does not address"] = write_fault_caught()
    results |= {f"the workload check: {f}": v for f, v in workload_check_faults_caught().items()}
    if probes.scaled_mm_refusal("tensorwise") is None:
        results["GEMM bounds: the tracer's _scaled_mm, an error 1.2-1.8 x its bound"] = tracer_caught(BOUND_FAULT)
    results["GEMM bounds: scaled_mm_quality, an error 1.2-1.8 x its bound"] = quality_caught(BOUND_FAULT)
    results |= {
        f"GEMM bounds: {f}, an error 1.2-1.8 x its bound": caught(BOUND_FAULT) for f, caught in GEMM_BOUNDS.items()
    }
    if WORKLOADS["static_custom_op"].refusal("cpu") is None:
        results["a workload: re-quantizing copy_ into float8 keeps stale codes"] = workload_fault_caught()
    if WORKLOADS["moe_dispatch"].refusal("cpu") is None:
        results["a workload: float8 index_select drops repeated rows (an MoE dispatch)"] = dispatch_fault_caught()
    results["a compiled region: a miscompiled cast one code toward zero"] = compiled_fault_caught()
    if native_ops.catalogue_refusal() is None:  # these stand-ins are built from torch's OpInfo catalogue
        results |= {f"native float8 ops: {f}": native_op_fault_caught(f) for f in NATIVE_OP_FAULTS}
    if probes.torchao_float8_refusal() is None:  # these stand-ins are built from torchao's tensors
        results |= {f"checkpoints: {f}": checkpoint_fault_caught(f) for f in CHECKPOINT_FAULTS}
        results |= {f"conversion: {f}": conversion_param_fault_caught(f) for f in CONVERSION_PARAM_FAULTS}
        results |= {f"torchao surface: a release adds {m}": surface_fault_caught(m) for m in ADDED_MEMBERS}
    if probes.torchao_recipe_refusal("tensorwise") is None:  # these run torchao's layer through _scaled_mm
        results |= {f"pad_inner_dim: {f}": pad_fault_caught(f) for f in PAD_FAULTS}
    caught = sum(results.values())
    record_observation("tests/meta: injected faults caught", f"{caught} of {len(results)}")
    assert caught == len(results), [k for k, v in results.items() if not v]
