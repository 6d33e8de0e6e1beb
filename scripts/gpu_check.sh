#!/usr/bin/env bash
# The GPU check on a T2 runner (one H100 / H200 / B200), one tier per call, everything worth keeping
# in one folder of at most eight files.
#   bash scripts/gpu_check.sh                 # tier 1: pytest -m gpu (conformance, regression checks, GEMM throughput)
#   bash scripts/gpu_check.sh --tier long     # the gpu_long tier alone: fine-tune comparison, whole-model benchmarks
#   options: --wheels DIR (carried wheels, default .whl), --stage-timeout S (default 480),
#            --dry-run (on the CPU device: --fp8-dry-run instead of --fp8-require-gpu; how CI runs it)
# Output (${OUT:-gpu-out}/): env.txt (versions; a C compiler, which Triton needs; each stage's exit
# and time), pytest-<tier>.log, junit-<tier>.xml, benchmarks-<tier>.json, cuda-profile.json,
# cpu-profile.json, diffs.txt, more.tar.gz (whatever else the tests wrote, and report-<tier>.md:
# the golden comparison as an upgrade report, with the end-of-run sections).
# Each stage runs under a timeout that interrupts it with SIGINT, so pytest still writes its junit
# and benchmark JSON; a stage past its time is reported, and the next one still runs.
# Nothing here needs the network: wheels are installed offline from the folder given.
set -uo pipefail
cd "$(dirname "$0")/.."
tier=1 wheels=.whl stage_timeout=480 dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tier) tier="$2"; shift 2 ;;
    --long) tier=long; shift ;;  # (the old spelling)
    --wheels) wheels="$2"; shift 2 ;;
    --stage-timeout) stage_timeout="$2"; shift 2 ;;
    --dry-run) dry=1; shift ;;
    *) echo "gpu_check.sh: unknown argument $1 (see the header)" >&2; exit 2 ;;
  esac
done
case "$tier" in 1|long) ;; *) echo "gpu_check.sh: --tier 1 or long, got $tier" >&2; exit 2 ;; esac
out="${OUT:-gpu-out}"
mkdir -p "$out" "$out/more"
if compgen -G "$wheels/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$wheels"/*.whl \
    && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"  # fp8ref from this checkout, installed or not
# A carried datasets that does not import here (it needs pyarrow >= 24) is dropped: its tests skip
# through the needs marker, naming it, instead of failing at import.
if [ -d /tmp/site/datasets ] && ! python3 -c "import datasets" 2> "$out/more/datasets-import.txt"; then
  rm -rf /tmp/site/datasets /tmp/site/datasets-*.dist-info
  echo "datasets: dropped, it does not import here (more.tar.gz: datasets-import.txt)" >> "$out/env.txt"
fi
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
} 2>&1 | tee -a "$out/env.txt"

# stage NAME CMD...: CMD under the stage timeout (SIGINT, then SIGKILL 60 s later); its exit and
# time go to env.txt. Returns CMD's exit status (124 when it ran past the timeout).
stage() {
  local name="$1" start rc
  shift
  start=$(date +%s)
  timeout -s INT -k 60 "$stage_timeout" "$@"
  rc=$?
  local note=""
  [ "$rc" -eq 124 ] && note=" (past the ${stage_timeout} s stage timeout: interrupted)"
  echo "stage $name: exit $rc in $(( $(date +%s) - start )) s$note" | tee -a "$out/env.txt"
  return "$rc"
}

# The packages this tier's checks need: a runner without them fails here instead of skipping green.
if [ "$tier" = 1 ]; then
  tier_args=(-m gpu) required=torchao,pytest_benchmark
else
  tier_args=(-m gpu_long --fp8-gpu-long) required=torchao,transformers
fi
device_args=(--fp8-require-gpu --fp8-require="$required")
device=cuda
if [ "$dry" = 1 ]; then
  device_args=(--fp8-dry-run) device=cpu
fi
bench_args=()
if python3 -c "import pytest_benchmark" 2>/dev/null; then
  bench_args=(--benchmark-json="$out/benchmarks-$tier.json" --benchmark-timer=fp8ref.harness.speed.bench.synchronized_clock)
fi
# pytest.ini's addopts (--strict-markers --strict-config -ra) stay in force.
FP8REF_RESULTS_DIR="$out/more" stage "pytest-$tier" python3 -m pytest "${tier_args[@]}" "${device_args[@]}" \
  -p no:cacheprovider -p no:randomly --durations=25 ${bench_args[@]+"${bench_args[@]}"} \
  --junitxml="$out/junit-$tier.xml" --fp8-report="$out/more/report-$tier.md" > "$out/pytest-$tier.log" 2>&1
rc=$?
tail -3 "$out/pytest-$tier.log"

if [ "$tier" = 1 ]; then
  # Both profiles from this install in this run: their diff is the device's doing alone. The
  # pinned goldens are compared separately, labelled: a difference there may be the versions'.
  stage cuda-profile python3 -m fp8ref profile --device "$device" --out "$out/cuda-profile.json" > "$out/more/profile-cuda.log" 2>&1
  stage cpu-profile python3 -m fp8ref profile --device cpu --out "$out/cpu-profile.json" > "$out/more/profile-cpu.log" 2>&1
  kind=$(python3 -c "from fp8ref.harness.stack.install import device_kind; print(device_kind('$device'))" 2>/dev/null || echo unknown)
  {
    echo "== this install's CPU profile -> its $kind profile (same versions: the device's differences)"
    python3 -m fp8ref diff "$out/cpu-profile.json" "$out/cuda-profile.json" 2>&1
    echo "== pinned tests/golden/cpu.json -> this install's CPU profile (the versions' differences)"
    python3 -m fp8ref diff tests/golden/cpu.json "$out/cpu-profile.json" 2>&1
    if [ -f "tests/golden/$kind.json" ]; then
      echo "== pinned tests/golden/$kind.json -> this install's $kind profile"
      python3 -m fp8ref diff "tests/golden/$kind.json" "$out/cuda-profile.json" 2>&1
    else
      echo "== no pinned tests/golden/$kind.json: the golden test pinned one in more.tar.gz and checked a second collection matches"
    fi
  } > "$out/diffs.txt"
fi
tar -czf "$out/more.tar.gz" -C "$out" more && rm -rf "$out/more"
exit "$rc"
