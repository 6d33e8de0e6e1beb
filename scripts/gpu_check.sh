#!/usr/bin/env bash
# The GPU check on a T2 runner (one H100 / H200 / B200), one tier per call, everything worth keeping
# in one folder of at most eight files. Each tier has a time budget for its stages, sized so that
# each tier fits a 10-minute GPU slot with its setup, and tier 1 twice (a rerun) a 15-minute one:
#   bash scripts/gpu_check.sh                     # tier 1, 300 s: the CUDA and CPU profiles (at most
#                                                 # 60 s each), then pytest -m gpu in what is left
#   bash scripts/gpu_check.sh --tier long-parity  # 540 s: the fine-tune comparison alone (four compiled
#                                                 # 200-step runs: three bf16, one FP8)
#   bash scripts/gpu_check.sh --tier long-bench   # 420 s: the other gpu_long tests (compiled Float8Linear
#                                                 # per recipe and a compiled training step, each vs bf16)
#   bash scripts/gpu_check.sh --tier long         # both long tiers, one after the other (960 s: a slot
#                                                 # of 17 minutes or more)
#   options: --wheels DIR (carried wheels, default .whl), --budget S (each tier's budget instead of
#            the one above), --stage-timeout S (no stage longer than S), --dry-run (on the CPU device:
#            --fp8-dry-run instead of --fp8-require-gpu; how CI runs it)
# The budgets are estimates for one H200 (not yet measured): a stage still running when its share
# of the budget is spent is interrupted (SIGINT, then SIGKILL 15 s later, both inside the share),
# so pytest still writes its junit and benchmark JSON, the stage's exit 124 and time go to env.txt,
# the next stage runs, and the script exits non-zero: a tier past its budget is never green.
# Output (${OUT:-gpu-out}/): env.txt (versions; a C compiler, which Triton needs; each stage's exit
# and time), pytest-<tier>.log, junit-<tier>.xml, benchmarks-<tier>.json, cuda-profile.json and
# cpu-profile.json (tier 1), diffs.txt (tier 1), more.tar.gz (whatever else the tests wrote, and
# report-<tier>.md: the golden comparison as an upgrade report, with the end-of-run sections).
# Nothing here needs the network: wheels are installed offline from the folder given.
set -uo pipefail
cd "$(dirname "$0")/.."
tier=1 wheels=.whl budget="" stage_cap="" dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tier) tier="$2"; shift 2 ;;
    --long) tier=long; shift ;;  # (the old spelling)
    --wheels) wheels="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --stage-timeout) stage_cap="$2"; shift 2 ;;
    --dry-run) dry=1; shift ;;
    *) echo "gpu_check.sh: unknown argument $1 (see the header)" >&2; exit 2 ;;
  esac
done
case "$tier" in
  1 | long-parity | long-bench) parts=("$tier") ;;
  long) parts=(long-parity long-bench) ;;
  *) echo "gpu_check.sh: --tier 1, long-parity, long-bench or long, got $tier" >&2; exit 2 ;;
esac
for n in "$budget" "$stage_cap"; do
  if [ -n "$n" ] && ! [[ "$n" =~ ^[0-9]+$ ]]; then
    echo "gpu_check.sh: --budget and --stage-timeout take whole seconds, got $n" >&2
    exit 2
  fi
done
# Each tier's budget in seconds, for all its stages together; tier 1's profiles take at most PROFILE_S each.
budget_of() {
  case "$1" in 1) echo 300 ;; long-parity) echo 540 ;; long-bench) echo 420 ;; esac
}
PROFILE_S=60 GRACE_S=15
out="${OUT:-gpu-out}"
mkdir -p "$out" "$out/more"
if compgen -G "$wheels/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$wheels"/*.whl \
    && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"  # fp8ref from this checkout, installed or not
# A carried datasets that does not import here (it needs pyarrow >= 24) is dropped: its tests skip
# through the needs marker, naming it, instead of failing at import (tier long-parity, which is
# nothing but such a test, requires it and stops at once, naming it).
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

# stage NAME MAX CMD...: CMD in its share of the tier's budget: what is left of it (the tier started
# at $tier_start), at most MAX seconds (0: no limit of its own) and at most --stage-timeout. SIGINT
# GRACE_S before the share ends, SIGKILL at its end. Its exit and time go to env.txt. Returns CMD's
# exit status (124 when it ran past its share; 125 when too little of the budget was left to start).
stage() {
  local name="$1" max="$2" start rc share
  shift 2
  start=$(date +%s)
  share=$(( tier_budget - (start - tier_start) ))
  [ "$max" -gt 0 ] && [ "$max" -lt "$share" ] && share=$max
  [ -n "$stage_cap" ] && [ "$stage_cap" -lt "$share" ] && share=$stage_cap
  if [ "$share" -le "$GRACE_S" ]; then
    echo "stage $name: not run, ${share} s left of the ${tier_budget} s budget" | tee -a "$out/env.txt"
    return 125
  fi
  timeout -s INT -k "$GRACE_S" $(( share - GRACE_S )) "$@"
  rc=$?
  local note=""
  [ "$rc" -eq 124 ] && note=" (past its ${share} s share of the ${tier_budget} s budget: interrupted)"
  echo "stage $name: exit $rc in $(( $(date +%s) - start )) s$note" | tee -a "$out/env.txt"
  return "$rc"
}

device=cuda
[ "$dry" = 1 ] && device=cpu
bench=0
python3 -c "import pytest_benchmark" 2>/dev/null && bench=1
final=0
for part in "${parts[@]}"; do
  tier_budget="${budget:-$(budget_of "$part")}" tier_start=$(date +%s)
  echo "tier $part: a budget of ${tier_budget} s" | tee -a "$out/env.txt"
  # The packages this tier's checks need: a runner without them fails at once instead of skipping
  # green (transformers: its fine-grained FP8 module too, tests/plugins/fixtures.missing_required).
  case "$part" in
    1) tier_args=(-m gpu) required=torchao,transformers,pytest_benchmark ;;
    long-parity) tier_args=(-m "gpu_long and not benchmark" --fp8-gpu-long) required=torchao,transformers,datasets ;;
    long-bench) tier_args=(-m "gpu_long and benchmark" --fp8-gpu-long) required=torchao,pytest_benchmark ;;
  esac
  device_args=(--fp8-require-gpu --fp8-require="$required")
  [ "$dry" = 1 ] && device_args=(--fp8-dry-run)
  bench_args=()
  [ "$bench" = 1 ] && bench_args=(--benchmark-json="$out/benchmarks-$part.json" --benchmark-timer=fp8ref.harness.speed.bench.synchronized_clock)

  if [ "$part" = 1 ]; then
    # Both profiles from this install in this run, first (each at most PROFILE_S; pytest gets what
    # they leave): their diff is the device's doing alone. The pinned goldens are compared
    # separately, labelled: a difference there may be the versions'.
    stage cuda-profile "$PROFILE_S" python3 -m fp8ref profile --device "$device" --out "$out/cuda-profile.json" \
      > "$out/more/profile-cuda.log" 2>&1 || final=1
    stage cpu-profile "$PROFILE_S" python3 -m fp8ref profile --device cpu --out "$out/cpu-profile.json" \
      > "$out/more/profile-cpu.log" 2>&1 || final=1
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
  # pytest.ini's addopts (--strict-markers --strict-config -ra) stay in force.
  FP8REF_RESULTS_DIR="$out/more" stage "pytest-$part" 0 python3 -m pytest "${tier_args[@]}" "${device_args[@]}" \
    -p no:cacheprovider -p no:randomly --durations=25 ${bench_args[@]+"${bench_args[@]}"} \
    --junitxml="$out/junit-$part.xml" --fp8-report="$out/more/report-$part.md" > "$out/pytest-$part.log" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] && final=$rc
  tail -3 "$out/pytest-$part.log"
done
tar -czf "$out/more.tar.gz" -C "$out" more && rm -rf "$out/more"
exit "$final"
