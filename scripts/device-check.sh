#!/usr/bin/env bash
# The one-command device check (issue 23): on a bare accelerator machine (one NVIDIA H200 here),
# install what is missing from carried wheels, synthesize the checkpoints, probe host -> device
# bandwidth and the disk, bench the loaders on the device, and write results + summary to $OUT.
#
#   scripts/device-check.sh                       # on the device machine: JAX_PLATFORMS=cuda
#   DEVICE_CHECK_PLATFORM=cpu DEVICE_CHECK_SMALL=tiny-gpt2 DEVICE_CHECK_LARGE=gpt2 \
#     OUT=/tmp/dc scripts/device-check.sh         # the same steps here, on the CPU backend
#
# Wheels: scripts/device-check-wheels.txt lists them (fetch with scripts/fetch-device-wheels.sh
# into .whl/, git-ignored; the device tool carries it: carry [".whl"]). Only those whose module
# does not import are installed, with pip --no-index --no-deps, into a --target folder put on
# PYTHONPATH (the machine's python3 is itself a venv, whose packages a new
# `venv --system-site-packages` would not see), or into DEVICE_CHECK_VENV if set (created with
# --system-site-packages).
#
# Environment (defaults): OUT (./device-check-out), DEVICE_CHECK_PLATFORM (cuda),
# DEVICE_CHECK_SMALL (sa3), DEVICE_CHECK_LARGE (llama3-8b), DEVICE_CHECK_WHEEL_LIST (that list), DEVICE_CHECK_REPEATS (3: small; the
# large set runs once), DEVICE_CHECK_STRATEGIES (pipelined,zerocopy,hostcast,eager,runai,
# fastsafetensors,instanttensor), DEVICE_CHECK_SMALL_MODELS (spec,transposed: the plain load and
# a port's transposes, interleaved), DEVICE_CHECK_LARGE_MODELS (spec,port: the real Llama port),
# DEVICE_CHECK_PORT_STRATEGIES (pipelined: the strategies the non-spec models run), DEVICE_CHECK_SECONDS (450: the large set's slow strategies are skipped, and
# said so, when less is left than DEVICE_CHECK_LARGE_SECONDS, 150), DEVICE_CHECK_WHEELS (.whl),
# DEVICE_CHECK_HOST_PROBE (1: run the machine probe, `loadbench probe --quick`, where it exists),
# PYTHON (python3), LOADBENCH_CACHE (/tmp/loadbench-cache: the synthetic checkpoints).
# Files under $OUT (at most 8, as the device tool brings back): device-check.log, machine.txt,
# probe.json, summary.md, summary-<set>.txt, results-<set>.jsonl.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
OUT=${OUT:-$ROOT/device-check-out}
PLATFORM=${DEVICE_CHECK_PLATFORM:-cuda}
SMALL=${DEVICE_CHECK_SMALL:-sa3}
LARGE=${DEVICE_CHECK_LARGE:-llama3-8b}
REPEATS=${DEVICE_CHECK_REPEATS:-3}
STRATEGIES=${DEVICE_CHECK_STRATEGIES:-pipelined,zerocopy,hostcast,eager,runai,fastsafetensors,instanttensor}
SMALL_MODELS=${DEVICE_CHECK_SMALL_MODELS:-spec,transposed}
LARGE_MODELS=${DEVICE_CHECK_LARGE_MODELS:-spec,port}
PORT_STRATEGIES=${DEVICE_CHECK_PORT_STRATEGIES:-pipelined}
SECONDS_ALLOWED=${DEVICE_CHECK_SECONDS:-450}
LARGE_SECONDS=${DEVICE_CHECK_LARGE_SECONDS:-150}
WHEELS=${DEVICE_CHECK_WHEELS:-$ROOT/.whl}
WHEEL_LIST=${DEVICE_CHECK_WHEEL_LIST:-$ROOT/scripts/device-check-wheels.txt}
PY=${PYTHON:-python3}
export LOADBENCH_CACHE=${LOADBENCH_CACHE:-/tmp/loadbench-cache}
export JAX_PLATFORMS=$PLATFORM PYTHONUNBUFFERED=1
mkdir -p "$OUT" || exit 2
exec > >(tee -a "$OUT/device-check.log") 2>&1
WORK=$(mktemp -d /tmp/device-check.XXXXXX)
step() { echo "== [${SECONDS}s] $*"; }
fail() { echo "device-check: error: $*"; exit 2; }

# 1. install what is missing, from the carried wheels
step "install from $WHEELS (listed in $WHEEL_LIST)"
if [ -n "${DEVICE_CHECK_VENV:-}" ]; then
    [ -x "$DEVICE_CHECK_VENV/bin/python" ] || "$PY" -m venv --system-site-packages "$DEVICE_CHECK_VENV" || fail "cannot make $DEVICE_CHECK_VENV"
    PY=$DEVICE_CHECK_VENV/bin/python
    TARGET=()
else
    SITE=$WORK/site
    TARGET=(--target "$SITE")
    export PYTHONPATH=$SITE
fi
missing=()
while read -r spec module _; do
    case "$spec" in ''|'#'*) continue ;; esac
    if "$PY" -c "import $module" 2>/dev/null; then
        echo "   $module: already there"
    else
        wheel=$(ls "$WHEELS"/"$(echo "${spec%%==*}" | tr - _)"-"${spec##*==}"-*.whl 2>/dev/null | head -1)
        [ -n "$wheel" ] || fail "$module is missing and $WHEELS has no wheel of $spec (scripts/fetch-device-wheels.sh)"
        echo "   $module: missing, installing $(basename "$wheel")"
        missing+=("$wheel")
    fi
done < "$WHEEL_LIST"
if [ ${#missing[@]} -gt 0 ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "${TARGET[@]}" "${missing[@]}" || fail "pip could not install ${missing[*]}"
fi
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
LB=("$PY" -m bench.cli)

# 2. the machine
step "machine"
{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi"
    "$PY" -c "import jax, flax, numpy, sys; print(sys.version.split()[0], 'jax', jax.__version__, 'flax', flax.__version__, 'numpy', numpy.__version__); print(jax.devices()); print([m.kind for m in jax.devices()[0].addressable_memories()])"
    "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" 2>&1 | tail -1
    free -g | head -2
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
"$PY" -c "import jax; assert jax.devices()[0].platform == '$PLATFORM', jax.devices()" || fail "jax does not see a $PLATFORM device"

# 3. synthesize the checkpoints (once; kept in $LOADBENCH_CACHE)
for shapes in "$SMALL" "$LARGE"; do
    step "synthesize $shapes"
    "$PY" -c "import sys; from pathlib import Path; from bench.run.matrix import Checkpoint; ck = Checkpoint.ensure(sys.argv[1], None, 0, Path(sys.argv[2]), 900); print(ck.path, ck.checkpoint_bytes, 'bytes')" "$shapes" "$LOADBENCH_CACHE" > "$WORK/ck-$shapes" || fail "cannot synthesize $shapes"
    cat "$WORK/ck-$shapes"
done
SMALL_FILE=$(cut -d' ' -f1 "$WORK/ck-$SMALL")
[ -d "$SMALL_FILE" ] && SMALL_FILE=$(ls "$SMALL_FILE"/*.safetensors | head -1)

# 4. probe host -> device bandwidth (pinned and pageable) and the disk; the machine's own ceilings
#    with the machine probe (`loadbench probe`) where it has landed (its record goes into probe.json
#    too)
step "probe"
machine_probe=""
if [ "${DEVICE_CHECK_HOST_PROBE:-1}" = 1 ] && "${LB[@]}" probe --help > /dev/null 2>&1; then
    "${LB[@]}" probe --quick --out "$WORK/machine-probe.json" && machine_probe=$WORK/machine-probe.json
fi
"$PY" scripts/device_check_probe.py "$OUT/probe.json" "$SMALL_FILE" \
    "${DEVICE_CHECK_PROBE_MIB:-1024}" $machine_probe || echo "probe failed (kept going)"

# 5. bench run on the device: the small set repeated, the large set once; each set's plain load
#    (every strategy) and then its port (a transposed model, the real architecture: the ports'
#    strategies only), staged, both into the set's results folder
bench() {  # shapes repeats strategies models
    step "bench run $1 x$2: $3 (model $4)"
    "${LB[@]}" bench run --shapes "$1" --repeats "$2" --max-repeats "$2" --strategies "$3" \
        --model "$4" --staging \
        --timeout 300 --out "$WORK/results-$1" >> "$OUT/summary-$1.txt" 2>&1
    echo "   exit $?"; cat "$OUT/summary-$1.txt" | grep -v '%|' | tail -20
}
bench_set() {  # shapes repeats strategies models: spec with every strategy, the ports with theirs
    local ports
    ports=$(echo "$4" | tr , '\n' | grep -v -x spec | paste -sd, -)
    bench "$1" "$2" "$3" spec
    [ -z "$ports" ] || bench "$1" "$2" "$PORT_STRATEGIES" "spec,$ports"
    cat "$WORK/results-$1"/*/*.jsonl > "$OUT/results-$1.jsonl" 2>/dev/null
}
bench_set "$SMALL" "$REPEATS" "$STRATEGIES" "$SMALL_MODELS"
left=$((SECONDS_ALLOWED - SECONDS))
large=$STRATEGIES
if [ "$left" -lt "$LARGE_SECONDS" ]; then
    large=$(echo "$STRATEGIES" | tr , '\n' | grep -v -x eager | paste -sd, -)
    echo "   only ${left}s left of ${SECONDS_ALLOWED}s: $LARGE runs without eager ($large)"
fi
bench_set "$LARGE" 1 "$large" "$LARGE_MODELS"

# 6. the summary: host peak, device peak, GB/s, the targets checked
step "summary"
"$PY" scripts/device_check_report.py "$OUT/summary.md" "$OUT"/results-*.jsonl || echo "report failed"
rm -rf "$WORK"
step "done: $OUT"
