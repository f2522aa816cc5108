#!/usr/bin/env bash
# The one-command device check (issues 23, 53, 73): on a bare accelerator machine (a TPU v5e host,
# an NVIDIA GPU), detect the platform, install what is missing, write the machine's facts, then run
# one part of the tables (scripts/device_check.py: synthesize, probe, bench, summary) within one
# call of the device tool (10 minutes), and write everything to $OUT.
#
#   scripts/device-check.sh                       # part `small`: sa3's table and the casts
#   scripts/device-check.sh --part large          # llama3-8b, its port, sa3's slow strategies
#   scripts/device-check.sh --part budgets        # the budget sweep on llama3-8b and sa3
#   DEVICE_CHECK_PLATFORM=cpu DEVICE_CHECK_SMALL=tiny-gpt2 OUT=/tmp/dc \
#     scripts/device-check.sh                     # the same steps here, on the CPU backend
#   source scripts/device-check.sh                # defines the functions below, runs nothing
#
# Platform: DEVICE_CHECK_PLATFORM (tpu, cuda, cpu), else what jax sees first
# (`jax.devices()[0].platform`: tpu; gpu or cuda -> cuda). That one program also writes the
# machine's facts: it is the only one outside the bench that opens the chip (one program at a
# time may hold it).
#
# Install: scripts/device-check-wheels.txt lists `distribution[==version] module [platforms]`.
# Each module that does not import comes from the host's own package index where it has one and
# holds the distribution (DEVICE_CHECK_INDEX, default /opt/pypi/simple; pip resolves its
# dependencies, then the jax* and numpy* it brought are deleted so the machine's own stay first),
# else from a carried wheel (DEVICE_CHECK_WHEELS: .whl-tpu on a TPU, .whl elsewhere; pip
# --no-index --no-deps), into a --target folder appended to PYTHONPATH (never replacing it), or
# into DEVICE_CHECK_VENV if set (created with --system-site-packages). Lines naming platforms the
# host lacks (the CUDA-only peers) are skipped with their reason, and so are those strategies.
#
# Other environment (defaults): OUT (./device-check-out), DEVICE_CHECK_PART (small),
# DEVICE_CHECK_SECONDS (540: the whole call, this script's steps included), DEVICE_CHECK_WHEEL_LIST
# (that list), PYTHON (python3); scripts/device_check.py's own (the shape sets, strategies,
# repeats, costs) pass through. Files under $OUT (the device tool brings back at most 8):
# device-check.log, machine.txt, and scripts/device_check.py's probe.json, bench.txt,
# results.jsonl and summary.md.
set -uo pipefail

DC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# -- small functions (tests/unit/test_device_check_plan.py calls them one by one) ----------------

step() { echo "== [${SECONDS}s] $*"; }
fail() { echo "device-check: error: $*"; exit 2; }

normalize_platform() {  # jax's name for a platform -> tpu | cuda | cpu | (as given)
    case "$1" in
        gpu | cuda | GPU | CUDA) echo cuda ;;
        tpu | TPU) echo tpu ;;
        cpu | CPU) echo cpu ;;
        *) echo "$1" ;;
    esac
}

# The program that detects the platform and writes the machine's facts (jax and numpy only: it
# runs before anything is installed). Its last line is `platform NAME`.
MACHINE_PY='
import sys
import jax, numpy
devices = jax.devices()
print(sys.version.split()[0], "jax", jax.__version__, "numpy", numpy.__version__)
print(devices)
try:
    print("memories", [m.kind for m in devices[0].addressable_memories()])
except Exception as exc:
    print("memories: n/a,", type(exc).__name__)
print("platform", devices[0].platform)
'

detect_platform() {  # PY FACTS_FILE -> echoes tpu|cuda|cpu (DEVICE_CHECK_PLATFORM wins); 1: none
    local py=$1 facts=$2 seen
    if [ -n "${DEVICE_CHECK_PLATFORM:-}" ]; then
        JAX_PLATFORMS=$DEVICE_CHECK_PLATFORM "$py" -c "$MACHINE_PY" > "$facts" 2>&1
    else
        "$py" -c "$MACHINE_PY" > "$facts" 2>&1
    fi
    seen=$(awk '$1 == "platform" {p = $2} END {print p}' "$facts")
    if [ -n "${DEVICE_CHECK_PLATFORM:-}" ]; then
        normalize_platform "$DEVICE_CHECK_PLATFORM"
        [ "$(normalize_platform "${seen:-none}")" = "$(normalize_platform "$DEVICE_CHECK_PLATFORM")" ]
        return
    fi
    [ -n "$seen" ] || return 1
    normalize_platform "$seen"
}

default_wheels() {  # PLATFORM -> the carried wheels' folder
    case "$1" in
        tpu) echo "$DC_ROOT/.whl-tpu" ;;
        *) echo "$DC_ROOT/.whl" ;;
    esac
}

skipped_on() {  # PLATFORMS(a,b or empty) PLATFORM -> 0 when a line for PLATFORMS is skipped here
    [ -n "$1" ] && [[ ",$1," != *",$2,"* ]]
}

index_name() {  # DIST -> its PEP 503 name
    echo "$1" | tr '[:upper:]' '[:lower:]' | sed -E 's/[-_.]+/-/g'
}

index_has() {  # INDEX_DIR SPEC -> 0 when the index holds the distribution (at the pinned version)
    local index=$1 dist=${2%%==*} version="" folder
    [[ $2 == *==* ]] && version=${2##*==}
    [ -n "$index" ] || return 1
    folder=$index/$(index_name "$dist")
    [ -d "$folder" ] || return 1
    [ -z "$version" ] && return 0
    { ls "$folder"; cat "$folder/index.html" 2>/dev/null; } | grep -q -F -- "-$version"
}

carried_wheel() {  # WHEELS SPEC -> the wheel's path (none: nothing, 1)
    local dist=${2%%==*} version="*" wheel
    [[ $2 == *==* ]] && version=${2##*==}
    dist=$(echo "$dist" | tr '[:upper:]' '[:lower:]' | sed -E 's/[-_.]+/_/g')
    wheel=$(shopt -s nocaseglob; compgen -G "$1/$dist-$version-*.whl" | sort | tail -1)
    [ -n "$wheel" ] || return 1
    echo "$wheel"
}

install_source() {  # INDEX_DIR WHEELS SPEC -> "index SPEC" | "wheel PATH"; 1: neither has it
    local wheel
    if index_has "$1" "$3"; then
        echo "index $3"
    elif wheel=$(carried_wheel "$2" "$3"); then
        echo "wheel $wheel"
    else
        return 1
    fi
}

missing_modules() {  # PY MODULE... -> the modules that cannot be found here, one a line
    local py=$1
    shift
    "$py" - "$@" <<'EOF' 2>/dev/null
import importlib.util, sys
for name in sys.argv[1:]:
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        print(name)
EOF
}

install_missing() {  # PY PLATFORM INDEX WHEELS LIST SITE|"" -> installs; 2 and a line: cannot
    local py=$1 platform=$2 index=$3 wheels=$4 list=$5 site=$6
    local spec module platforms source from_index=() from_wheels=() modules=() missing
    local target=()
    [ -z "$site" ] || target=(--target "$site")
    while read -r spec module platforms _; do
        case "$spec" in '' | '#'*) continue ;; esac
        if skipped_on "${platforms:-}" "$platform"; then
            echo "   $module: skipped, a ${platforms} only package (this host: $platform)"
            continue
        fi
        modules+=("$module:$spec")
    done < "$list"
    missing=$(missing_modules "$py" "${modules[@]%%:*}")
    for entry in "${modules[@]}"; do
        module=${entry%%:*} spec=${entry#*:}
        if ! grep -q -x -F "$module" <<< "$missing"; then
            echo "   $module: already there"
            continue
        fi
        if ! source=$(install_source "$index" "$wheels" "$spec"); then
            echo "device-check: error: $module is missing and neither the host's index (${index:-none}) nor $wheels has $spec (scripts/fetch-device-wheels.sh)"
            return 2
        fi
        if [ "${source%% *}" = index ]; then
            echo "   $module: missing, installing $spec from $index"
            from_index+=("$spec")
        else
            echo "   $module: missing, installing $(basename "${source#wheel }")"
            from_wheels+=("${source#wheel }")
        fi
    done
    if [ ${#from_index[@]} -gt 0 ]; then
        PIP_CONFIG_FILE=/dev/null "$py" -m pip install --isolated -q --only-binary=:all: \
            --no-compile --no-cache-dir --index-url "file://$index" "${target[@]}" \
            "${from_index[@]}" || { echo "device-check: error: pip could not install ${from_index[*]} from $index"; return 2; }
        # the machine's own jax and numpy stay first: drop those pip brought as dependencies
        [ -z "$site" ] || rm -rf "$site"/jax "$site"/jax-* "$site"/jaxlib* "$site"/numpy*
    fi
    if [ ${#from_wheels[@]} -gt 0 ]; then
        "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "${target[@]}" \
            "${from_wheels[@]}" || { echo "device-check: error: pip could not install ${from_wheels[*]}"; return 2; }
    fi
}

# -- the check ------------------------------------------------------------------------------

main() {
    cd "$DC_ROOT" || exit 2
    PART=${DEVICE_CHECK_PART:-small}
    case "${1:-}" in
        --part) PART=${2:?--part takes small, large, budgets or all} ;;
        --part=*) PART=${1#--part=} ;;
        "") ;;
        *) fail "unknown argument $1 (use --part small|large|budgets|all)" ;;
    esac
    OUT=${OUT:-$DC_ROOT/device-check-out}
    PY=${PYTHON:-python3}
    SECONDS_ALLOWED=${DEVICE_CHECK_SECONDS:-540}
    WHEEL_LIST=${DEVICE_CHECK_WHEEL_LIST:-$DC_ROOT/scripts/device-check-wheels.txt}
    INDEX=${DEVICE_CHECK_INDEX-/opt/pypi/simple}
    [ -d "$INDEX" ] || INDEX=""
    export LOADBENCH_CACHE=${LOADBENCH_CACHE:-/tmp/loadbench-cache}
    export PYTHONUNBUFFERED=1
    mkdir -p "$OUT" || exit 2
    exec > >(tee -a "$OUT/device-check.log") 2>&1
    WORK=$(mktemp -d /tmp/device-check.XXXXXX)

    # 1. the platform, and the machine's facts (the one program outside the bench that opens it)
    step "machine: which platform (${DEVICE_CHECK_PLATFORM:-detected by jax})"
    PLATFORM=$(detect_platform "$PY" "$WORK/machine.txt") \
        || { cat "$WORK/machine.txt"; fail "jax does not see a ${DEVICE_CHECK_PLATFORM:-usable} device"; }
    echo "   platform: $PLATFORM"
    export JAX_PLATFORMS=$PLATFORM

    # 2. install what is missing: the host's index first, carried wheels otherwise
    WHEELS=${DEVICE_CHECK_WHEELS:-$(default_wheels "$PLATFORM")}
    step "install what is missing (index: ${INDEX:-none}; wheels: $WHEELS; list: $WHEEL_LIST)"
    local site=""
    if [ -n "${DEVICE_CHECK_VENV:-}" ]; then
        [ -x "$DEVICE_CHECK_VENV/bin/python" ] || "$PY" -m venv --system-site-packages "$DEVICE_CHECK_VENV" || fail "cannot make $DEVICE_CHECK_VENV"
        PY=$DEVICE_CHECK_VENV/bin/python
    else
        site=$WORK/site
        mkdir -p "$site"
    fi
    # appended: the machine's own packages (its jax) stay first
    export PYTHONPATH=$DC_ROOT${PYTHONPATH:+:$PYTHONPATH}${site:+:$site}
    install_missing "$PY" "$PLATFORM" "$INDEX" "$WHEELS" "$WHEEL_LIST" "$site" || exit 2
    {
        date -u
        cat "$WORK/machine.txt"
        "$PY" -c "import importlib.metadata as m; print(*(f'{d} {m.version(d)}' for d in ('flax', 'safetensors', 'orbax-checkpoint', 'psutil')), sep=', ')" 2>&1 | tail -1
        [ "$PLATFORM" = cuda ] && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
        "$PY" -c "import torch; print('torch', torch.__version__)" 2>&1 | tail -1
        free -g | head -2
        nproc
    } > "$OUT/machine.txt" 2>&1
    cat "$OUT/machine.txt"

    # 3. the part's tables and their summary (scripts/device_check.py), in the time left
    case "$PLATFORM" in tpu | cuda | cpu) ;; *) fail "no tables for platform $PLATFORM (tpu, cuda, cpu)" ;; esac
    "$PY" scripts/device_check.py --platform "$PLATFORM" --part "$PART" --out "$OUT" \
        --seconds $((SECONDS_ALLOWED - SECONDS))
    local rc=$?
    rm -rf "$WORK"
    return $rc
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    main "$@"
fi
