#!/usr/bin/env bash
# One end-to-end GPU run on a T2 runner (one H100 / H200 / B200): the GPU suite with the
# benchmarks, a CUDA behaviour profile, and the artefacts under ${OUT:-gpu-out}/.
#   bash scripts/gpu_run.sh            # torch with CUDA, torchao and the test extras already installed
# On a machine with torch preinstalled but no torchao or datasets and no network: carry the torchao,
# datasets, dill and multiprocess wheels (and their missing dependencies) in .whl/ and run
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
# first. Nothing here needs the network.
set -uo pipefail
out="${OUT:-gpu-out}"
mkdir -p "$out"
python3 - <<'PY' | tee "$out/versions.txt"
import torch, platform
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(), "capability", torch.cuda.get_device_capability())
for pkg in ("torchao", "ml_dtypes", "transformers", "datasets", "hypothesis", "pytest_benchmark"):
    try:
        print(pkg, __import__(pkg).__version__)
    except Exception as e:
        print(pkg, "missing", type(e).__name__)
PY
# pytest.ini's addopts (--strict-markers --strict-config -ra) stay in force. Without
# pytest-benchmark the benchmark tests skip (needs marker) and there is no JSON to ask for.
bench_args=()
if python3 -c "import pytest_benchmark" 2>/dev/null; then
  bench_args=(--benchmark-json="$out/benchmarks.json")
else
  echo "pytest-benchmark is not installed: benchmark tests skip, no benchmarks.json" | tee -a "$out/versions.txt"
fi
FP8REF_RESULTS_DIR="$out" python3 -m pytest -m gpu -p no:cacheprovider ${bench_args[@]+"${bench_args[@]}"} \
  --junitxml="$out/junit.xml" 2>&1 | tee "$out/pytest-gpu.log"
rc=${PIPESTATUS[0]}
python3 -m fp8ref profile --device cuda --out "$out/cuda-profile.json" 2>&1 | tail -1
python3 -m fp8ref diff tests/golden/cpu.json "$out/cuda-profile.json" > "$out/cpu-vs-cuda.txt" 2>&1
exit "$rc"
