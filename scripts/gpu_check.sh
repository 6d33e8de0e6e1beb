#!/usr/bin/env bash
# The GPU check on a T2 runner (one H100 / H200 / B200), everything worth keeping in one folder.
#   bash scripts/gpu_check.sh          # pytest -m gpu: conformance, regression checks, GEMM throughput
#   bash scripts/gpu_check.sh --long   # and the gpu_long tier: fine-tune comparison, whole-model benchmarks
# Output (${OUT:-gpu-out}/): env.txt (versions of torch, CUDA, Triton, torchao, ...; a C compiler,
# which Triton needs), pytest-gpu.log, junit.xml, benchmarks.json, cuda-profile.json, cpu-vs-cuda.txt.
# Nothing here needs the network. On a machine with torch preinstalled but no torchao or datasets,
# carry their wheels (and missing dependencies) in .whl/; they are installed to /tmp/site first.
# --fp8-require-gpu: a runner whose CUDA is missing or broken fails here instead of skipping green.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
tier=(-m gpu)
[ "${1:-}" = "--long" ] && tier=(-m gpu --fp8-gpu-long)
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"  # fp8ref from this checkout, installed or not
{
  python3 - <<'PY'
import importlib, platform, torch
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(), "capability", torch.cuda.get_device_capability())
else:
    print("device none: torch.cuda.is_available() is False")
for pkg in ("triton", "torchao", "ml_dtypes", "transformers", "datasets", "hypothesis", "pytest", "pytest_benchmark"):
    try:
        print(pkg, importlib.import_module(pkg).__version__)
    except Exception as e:
        print(pkg, "missing", type(e).__name__)
PY
  for cc in cc gcc clang; do command -v "$cc" > /dev/null && { echo "C compiler: $("$cc" --version | head -1)"; break; }; done \
    || echo "C compiler: none (Triton cannot build its kernels)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: none"
} | tee "$out/env.txt"
# pytest.ini's addopts (--strict-markers --strict-config -ra) stay in force. Without
# pytest-benchmark the benchmark tests skip (needs marker) and there is no JSON to ask for.
bench_args=()
if python3 -c "import pytest_benchmark" 2>/dev/null; then
  bench_args=(--benchmark-json="$out/benchmarks.json" --benchmark-timer=fp8ref.harness.bench.synchronized_clock)
else
  echo "pytest-benchmark is not installed: benchmark tests skip, no benchmarks.json" | tee -a "$out/env.txt"
fi
start=$(date +%s)
FP8REF_RESULTS_DIR="$out" python3 -m pytest "${tier[@]}" --fp8-require-gpu -p no:cacheprovider -p no:randomly \
  --durations=25 ${bench_args[@]+"${bench_args[@]}"} --junitxml="$out/junit.xml" 2>&1 | tee "$out/pytest-gpu.log"
rc=${PIPESTATUS[0]}
echo "pytest ${tier[*]}: exit $rc in $(( $(date +%s) - start )) s" | tee -a "$out/env.txt"
python3 -m fp8ref profile --device cuda --out "$out/cuda-profile.json" 2>&1 | tail -1
python3 -m fp8ref diff tests/golden/cpu.json "$out/cuda-profile.json" > "$out/cpu-vs-cuda.txt" 2>&1
exit "$rc"
