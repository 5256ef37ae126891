#!/usr/bin/env bash
# The GPU machine's run, prepared to fit in about 8 minutes: `bash tests/device/run.sh`.
#
# It describes the machine (GPUs, the host's CPU and cores, the versions of Python, numpy,
# numba, torch and CuPy: nothing is installed, it says what imports), then runs its parts in
# order of value, each under its own `timeout`, so that a hang costs that part alone:
#
#   gpu-check-optable    tests/gpu/check.py: every op-table row on CuPy, the update kernels
#   gpu-check-step       tests/gpu/check.py: the w3 and lm steps against PyTorch on one GPU
#   gpu-check-translate  tests/gpu/check.py: python -m demos.translate --device cuda
#   gpu-launches         tests/gpu/launches.py: the CUDA kernels of one w2 step, its time
#   cpu-scaling          tests/benchmarks/scaling.py --threads 2,8,16 --rounds 3
#   cpu-profile          tests/benchmarks/profile_step.py --threads 16 --only w2,w3
#
# Each part's limit is its own cap or what is left of the budget (DEVICE_RUN_BUDGET_S, 480 s
# by default), whichever is less; a part with under 20 s left is skipped. Without a usable GPU
# (CuPy does not import, or sees no device) the gpu-* parts are skipped, saying why.
# DEVICE_RUN_QUICK=1 makes the parts with a size tiny (the CPU parts: the LM at 1 and 2
# threads): it checks the script on a small machine in a few minutes. DEVICE_RUN_ONLY=a,b runs
# those parts alone (a second try of what failed).
#
# Everything goes under $OUT (a new temporary folder where OUT is unset): machine.txt, one
# <part>.log per part, check.py's translate run in gpu-check/, and summary.txt: each part's
# wall seconds and status (ok, exit N, timed out, skipped: why), then its result lines.
# The exit status is 1 if a part that ran did not end with status 0.
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PYTHON=${PYTHON:-$(command -v python || command -v python3)}
OUT=${OUT:-$(mktemp -d -t device-run.XXXXXX)}
mkdir -p "$OUT"
QUICK=${DEVICE_RUN_QUICK:-0}
ONLY=${DEVICE_RUN_ONLY:-}
BUDGET=${DEVICE_RUN_BUDGET_S:-480}
MIN_PART_SECONDS=20
SUMMARY=$OUT/summary.txt
START=$SECONDS
FAILED=0

describe_machine() {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo 'unknown (no git here)')"
    if command -v nvidia-smi >/dev/null 2>&1; then
        timeout 30 nvidia-smi -L
        timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    else
        echo "nvidia-smi: not found"
    fi
    if command -v lscpu >/dev/null 2>&1; then
        lscpu | grep -E '^(Model name|CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket):'
    else
        grep -m 1 '^model name' /proc/cpuinfo
    fi
    echo "cores available (nproc): $(nproc)"
    echo "load average: $(cut -d ' ' -f 1-3 /proc/loadavg)"
    timeout 120 "$PYTHON" - <<'EOF' 2>&1
import importlib
import platform
import sys

sys.path.insert(0, "tests/benchmarks")
print(f"python {platform.python_version()}")
for name in ("numpy", "numba", "torch", "cupy", "threadpoolctl"):
    try:
        module = importlib.import_module(name)
    except Exception as error:  # noqa: BLE001  (say what does not import, and why)
        print(f"{name}: not importable ({type(error).__name__}: {error})")
        continue
    print(f"{name} {module.__version__}")
    if name == "numpy":
        import timing
        blas = timing.blas()
        print(f"  BLAS: {blas['name']} {blas['version']}, core {blas['core']}")
    if name == "torch":
        print(f"  torch's CUDA: {module.version.cuda}, available: {module.cuda.is_available()}")
    if name == "cupy":
        try:
            runtime = module.cuda.runtime
            print(f"  CUDA runtime {runtime.runtimeGetVersion()}, driver "
                  f"{runtime.driverGetVersion()}, {runtime.getDeviceCount()} device(s)")
        except Exception as error:  # noqa: BLE001
            print(f"  no device: {type(error).__name__}: {error}")
import autograd_lite as ag
print(f"autograd_lite's kernels on the host: {ag.kernels.backend()}")
EOF
}

# Why the GPU cannot be used, on one line; nothing where CuPy computes on a device.
gpu_missing_reason() {
    local reason rc
    reason=$(timeout 120 "$PYTHON" - <<'EOF' 2>/dev/null
try:
    import cupy
except Exception as error:  # noqa: BLE001
    print(f"cupy not importable: {error}")
else:
    try:
        assert cupy.cuda.runtime.getDeviceCount() > 0, "CUDA sees no device"
        assert int((cupy.arange(3) * 2).sum()) == 6, "a kernel computed a wrong sum"
    except Exception as error:  # noqa: BLE001
        print(f"no device: {error}")
EOF
)
    rc=$?
    if [ "$rc" -ne 0 ] && [ -z "$reason" ]; then
        reason="the probe of CuPy ended with status $rc"
    fi
    echo "$reason" | tail -n 1
}

# record NAME SECONDS STATUS [RESULT]: one part's lines in the summary.
record() {
    printf '%-20s %5s s  %s\n' "$1" "$2" "$3" >> "$SUMMARY"
    if [ -n "${4:-}" ]; then
        printf '%s\n' "$4" | sed 's/^/    /' >> "$SUMMARY"
    fi
}

# run_part NAME CAP_SECONDS RESULT_PATTERN COMMAND...: the command under timeout, its output
# in NAME.log; the log's lines matching RESULT_PATTERN (grep -E; empty: none) go in the summary.
run_part() {
    local name=$1 cap=$2 pattern=$3
    shift 3
    if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$name,"* ]]; then
        skip_part "$name" "not in DEVICE_RUN_ONLY"
        return
    fi
    local left=$((BUDGET - (SECONDS - START)))
    local limit=$((cap < left - 5 ? cap : left - 5))
    if [ "$limit" -lt "$MIN_PART_SECONDS" ]; then
        skip_part "$name" "out of time ($left s of $BUDGET left)"
        return
    fi
    echo "== $name (limit $limit s): $*"
    local began=$SECONDS rc status
    timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
    rc=$?
    case $rc in
        0) status="ok" ;;
        124 | 137) status="timed out after $limit s" ;;
        *) status="exit $rc" ;;
    esac
    if [ "$rc" -ne 0 ]; then
        FAILED=1
    fi
    local result=""
    if [ -n "$pattern" ]; then
        result=$(grep -E "$pattern" "$OUT/$name.log" | tail -n 40)
    fi
    record "$name" $((SECONDS - began)) "$status" "$result"
    echo "   $status, $((SECONDS - began)) s; the log's last lines:"
    tail -n 6 "$OUT/$name.log" | cut -c 1-160 | sed 's/^/   | /'
}

skip_part() {
    record "$1" 0 "skipped: $2"
    echo "== $1: skipped: $2"
}

describe_machine > "$OUT/machine.txt"
cat "$OUT/machine.txt"
echo "output: $OUT; budget $BUDGET s; quick: $QUICK; only: ${ONLY:-every part}"
printf '%-20s %7s  %s\n' "part (<part>.log)" "wall" "status" > "$SUMMARY"

if [ "$QUICK" = 1 ]; then
    LAUNCHES=(--warmup 1 --repeats 2)
    SCALING=(--quick --threads "1,2")
    PROFILE=(--threads 2 --only lm --steps 2)
else
    LAUNCHES=()
    SCALING=(--threads "2,8,16" --rounds 3)
    PROFILE=(--threads 16 --only "w2,w3")
fi

CHECK=("$PYTHON" tests/gpu/check.py --out "$OUT/gpu-check")
missing=$(gpu_missing_reason)
if [ -z "$missing" ]; then
    run_part gpu-check-optable 210 '^(optable|kernels): ' "${CHECK[@]}" --skip translate,step
    run_part gpu-check-step 180 '^(step: |  (w3|lm) )' \
        "${CHECK[@]}" --skip optable,kernels,translate
    run_part gpu-check-translate 150 '^(translate: |  .*exact match)' \
        "${CHECK[@]}" --skip optable,kernels,step
    run_part gpu-launches 120 'training step on' \
        "$PYTHON" tests/gpu/launches.py ${LAUNCHES[@]+"${LAUNCHES[@]}"}
else
    for part in gpu-check-optable gpu-check-step gpu-check-translate gpu-launches; do
        skip_part "$part" "no GPU ($missing)"
    done
fi
SCALING_RESULT='^(\$ bench_models|  (w1|w2|w3|lm) +(train|infer) |Measured on|A training step'
SCALING_RESULT+='|Inference|\| (workload|w1|w2|w3|lm) )'
run_part cpu-scaling 300 "$SCALING_RESULT" "$PYTHON" tests/benchmarks/scaling.py "${SCALING[@]}"
run_part cpu-profile 120 '^(w1|w2|w3|lm): |^  step ' \
    "$PYTHON" tests/benchmarks/profile_step.py "${PROFILE[@]}"

echo "total: $((SECONDS - START)) s of a $BUDGET s budget" >> "$SUMMARY"
echo
cat "$SUMMARY"
echo "everything is under $OUT"
exit "$FAILED"
