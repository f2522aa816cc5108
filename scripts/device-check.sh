#!/usr/bin/env bash
# The one-command device check (issues 23, 53): on a bare accelerator machine (a TPU v5e host, an
# NVIDIA H200), detect the platform, install what is missing, synthesize the checkpoints, probe
# host -> device bandwidth and the disk, bench the loaders on the device within one call of the
# device tool (10 minutes), and write results + summary to $OUT.
#
#   scripts/device-check.sh                       # on the device machine: the platform detected
#   DEVICE_CHECK_PLATFORM=cpu DEVICE_CHECK_SMALL=tiny-gpt2 DEVICE_CHECK_LARGE=gpt2 \
#     OUT=/tmp/dc scripts/device-check.sh         # the same steps here, on the CPU backend
#   source scripts/device-check.sh                # defines the functions below, runs nothing
#
# Platform: DEVICE_CHECK_PLATFORM (tpu, cuda, cpu), else what jax sees first
# (`jax.devices()[0].platform`: tpu; gpu or cuda -> cuda). That one program also writes the
# machine's facts: it is the only one outside the bench that opens the chip (each costs ~15 s on
# the TPU host, and one program at a time may hold it).
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
# The matrix (one bench run per table, interleaved repeats, one shared results folder so the
# bench's own machine probe runs once), each step under `timeout`, planned against
# DEVICE_CHECK_SECONDS (540) from an estimate per child process (DEVICE_CHECK_CHILD_SECONDS:
# tpu 24 (seen on 2026-12-07: 17-29 s a sa3 row, 24 s a run with the bench's own passes, 8-12 s
# of it opening the chip; 15-17 s on 2026-12-06's machine; `bench run`'s progress lines split
# each row's seconds), cuda 15, cpu 6, then what the small set's runs
# really took; DEVICE_CHECK_LARGE_CHILD_SECONDS: tpu 33 (29-32 s a llama3-8b row, 12 s of it
# verifying), cuda 30, cpu 8; DEVICE_CHECK_PORT_CHILD_SECONDS, a large port's row, whose check
# compares transposed tiles: tpu 45 (38.6 s on 2026-12-07, 18 s of it verifying), cuda 40, cpu
# 10); what does not fit runs fewer repeats, down to two (one run is not judged on time), then
# without its slow strategies (DEVICE_CHECK_SLOW: eager,builder,hostcast,orbax-safetensors), then
# once, then not at all, and the log and summary.md say so:
#   1. SMALL (sa3) x DEVICE_CHECK_REPEATS (3; 0 leaves it out): DEVICE_CHECK_STRATEGIES (tpu:
#      pipelined,mmap-put,builder,hostcast,zerocopy,orbax-safetensors; else pipelined,zerocopy,
#      hostcast,eager,runai,fastsafetensors,instanttensor) with the models of
#      DEVICE_CHECK_SMALL_MODELS (tpu: spec; else spec,transposed: a port's runs use
#      DEVICE_CHECK_PORT_STRATEGIES, pipelined);
#   2. SMALL into a DEVICE_CHECK_MODEL_DTYPE (bfloat16) model, DEVICE_CHECK_DTYPE_STRATEGIES
#      (pipelined) x DEVICE_CHECK_DTYPE_REPEATS (2) (empty DEVICE_CHECK_MODEL_DTYPE: not run);
#   3. LARGE (llama3-8b) x DEVICE_CHECK_LARGE_REPEATS (1; up to 3 if time allows):
#      DEVICE_CHECK_LARGE_STRATEGIES (tpu: pipelined,mmap-put; else the small set's without eager),
#      then its ports (DEVICE_CHECK_LARGE_MODELS, spec,port: the real Llama port) with the port
#      strategies; where both do not fit, the plain rows take the ports' time (`plan_large`).
# Time left for 2 and 3 is reserved before 1 is planned. LARGE is synthesized in the background
# while the probe runs (its figures are then taken beside one busy core: the log says so).
#
# Other environment (defaults): OUT (./device-check-out), DEVICE_CHECK_SMALL (sa3),
# DEVICE_CHECK_LARGE (llama3-8b), DEVICE_CHECK_WHEEL_LIST (that list), DEVICE_CHECK_PROBE_SECONDS
# (240: the bench's probe, `loadbench probe --results`, sized for the larger set, up to 2 GiB), PYTHON
# (python3), LOADBENCH_CACHE (/tmp/loadbench-cache: the synthetic checkpoints).
# Files under $OUT (at most 8, as the device tool brings back): device-check.log, machine.txt,
# probe.json, summary.md, summary-<set>.txt, results-<set>.jsonl (the bf16 runs go with SMALL's).
# The page cache is warm in every row; where /proc/sys/vm/drop_caches is missing (the TPU
# host) a cold cache cannot be forced, and summary.md says so.
set -uo pipefail

DC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# -- small functions (tests/unit/test_device_check_functions.py calls them one by one) -----------

step() { echo "== [${SECONDS}s] $*"; }
fail() { echo "device-check: error: $*"; exit 2; }
note() {  # a line for the log and for summary.md's notes
    echo "   note: $*"
    [ -z "${NOTES:-}" ] || echo "- $*" >> "$NOTES"
}

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

keep_strategies() {  # PY PLATFORM a,b,... -> those that can run here; the others' reasons on
    # stderr (the registry's PLATFORMS and REQUIRES, read without importing jax: runai and
    # fastsafetensors need torch, instanttensor a CUDA device)
    "$1" - "$2" "$3" <<'EOF'
import sys
from loader import strategies
platform, wanted = sys.argv[1], [s for s in sys.argv[2].split(",") if s]
catalog = strategies.catalog()
kept = []
for name in wanted:
    info = catalog.get(name)
    if info is not None and info.platforms and platform not in info.platforms:
        where = " or ".join(info.platforms)
        print(f"{name}: skipped, it loads onto {where} devices only (this host: {platform})",
              file=sys.stderr)
    elif info is not None and info.missing():
        hint = f" ({info.install_hint})" if info.install_hint else ""
        print(f"{name}: skipped, needs {', '.join(info.missing())}, not on this host{hint}",
              file=sys.stderr)
    else:
        kept.append(name)
print(",".join(kept))
EOF
}

count() {  # a,b,c -> 3
    if [ -z "$1" ]; then echo 0; else tr , '\n' <<< "$1" | grep -c .; fi
}

without() {  # a,b,c DROP(a,b) -> the first less the second
    tr , '\n' <<< "$1" | grep -v -x -F -f <(tr , '\n' <<< "$2") | paste -sd, -
}

fit_matrix() {  # SECONDS_LEFT CHILD_SECONDS WANT_REPEATS STRATEGIES SLOW -> "REPEATS STRATEGIES"
    # The most repeats (<= WANT) of every strategy that fit. Where fewer than two fit (one run is
    # not judged on time), the slow ones are dropped one by one, in SLOW's order, until two do
    # (or one, when no more can go); "0 " when not even one run fits. What was cut: stderr.
    local left=$1 cost=$2 want=$3 strategies=$4 slow=$5 n repeats s judged=2
    if [ "$want" -le 0 ]; then  # a set left out on purpose (DEVICE_CHECK_REPEATS=0)
        echo "left out: 0 repeats asked" >&2
        echo "0 "
        return
    fi
    [ "$want" -lt "$judged" ] && judged=$want
    n=$(count "$strategies")
    if [ "$n" -le 0 ] || [ "$cost" -le 0 ]; then
        echo "0 "
        return
    fi
    repeats=$((left / (cost * n)))
    for s in $(tr , ' ' <<< "$slow"); do
        [ "$repeats" -ge "$judged" ] && break
        tr , '\n' <<< "$strategies" | grep -q -x -F "$s" || continue
        [ "$n" -gt 1 ] || break
        strategies=$(without "$strategies" "$s")
        n=$((n - 1))
        repeats=$((left / (cost * n)))
        echo "$s left out: ${left}s left, ${cost}s per run" >&2
    done
    [ "$repeats" -gt "$want" ] && repeats=$want
    if [ "$repeats" -lt 1 ]; then
        echo "no run fits: ${left}s left, ${cost}s per run of $n strategies" >&2
        echo "0 "
        return
    fi
    [ "$repeats" -lt "$want" ] && echo "${repeats} repeat(s) of ${want}: ${n} strategies x ${cost}s per run in ${left}s" >&2
    echo "$repeats $strategies"
}

plan_large() {  # SECONDS_LEFT CHILD_SECONDS WANT_REPEATS STRATEGIES SLOW PORT_RUNS [PORT_SECONDS]
    # -> "REPEATS STRATEGIES PORTS" (PORTS 1: the ports keep their time after these rows; 0: the
    # plain rows took it). The plain rows come first, as the table the ports are read against:
    # up to 3 repeats where the ports still fit after them, else the repeats asked with the ports
    # kept, else with the ports' time too, else the first strategy (the default) alone. A port's
    # run costs PORT_SECONDS (default CHILD_SECONDS: its check is slower). What was cut: stderr.
    local left=$1 cost=$2 want=$3 strategies=$4 slow=$5 port_runs=$6 port_cost=${7:-$2} plan first said kept=1
    plan=$(fit_matrix $((left - port_cost * port_runs * want)) "$cost" 3 "$strategies" "$slow" 2> /dev/null)
    if [ "${plan%% *}" -gt "$want" ]; then
        echo "$plan 1"
        return
    fi
    said=$(mktemp)  # what the attempt taken cut
    plan=$(fit_matrix $((left - port_cost * port_runs)) "$cost" "$want" "$strategies" "$slow" 2> "$said")
    if [ "${plan%% *}" -lt 1 ]; then
        kept=0
        [ "$port_runs" -gt 0 ] && echo "the ports left out: the plain rows take their time" >&2
        plan=$(fit_matrix "$left" "$cost" "$want" "$strategies" "$slow" 2> "$said")
        first=${strategies%%,*}
        if [ "${plan%% *}" -lt 1 ] && [ "$first" != "$strategies" ]; then
            echo "only $first (the default): ${left}s left, ${cost}s per run" > "$said"
            plan=$(fit_matrix "$left" "$cost" "$want" "$first" "" 2>> "$said")
        fi
    fi
    cat "$said" >&2
    rm -f "$said"
    echo "$plan $kept"
}

probe_bytes() {  # PYTHON SHAPES... -> the probe file size `bench run` takes for the largest set
    "$1" -c 'import sys
from bench.run.ceiling import probe_bytes_for
from shapes import load_spec
print(probe_bytes_for(max(load_spec(name).total_bytes for name in sys.argv[1:])) >> 20 << 20)' "${@:2}"
}

platform_default() {  # PLATFORM TPU_VALUE CUDA_VALUE CPU_VALUE
    case "$1" in tpu) echo "$2" ;; cuda) echo "$3" ;; *) echo "$4" ;; esac
}

# -- the check ------------------------------------------------------------------------------

bench() {  # LABEL SHAPES REPEATS STRATEGIES MODELS SECONDS [bench run args...]
    local label=$1 shapes=$2 repeats=$3 strategies=$4 models=$5 secs=$6 rc newest
    shift 6
    step "bench run $label: $shapes x$repeats: $strategies (model $models${*:+, $*}; at most ${secs}s)"
    local before
    before=$(compgen -G "$RESULTS/*/*.jsonl")
    local started=$SECONDS
    timeout --kill-after=15 "$secs" "${LB[@]}" bench run --shapes "$shapes" --repeats "$repeats" \
        --max-repeats "$repeats" --strategies "$strategies" --model "$models" --staging \
        --timeout "$CHILD_TIMEOUT" --out "$RESULTS" "$@" >> "$OUT/summary-$shapes.txt" 2>&1
    rc=$?
    # what one child really took here (the chip's start included): the later steps' estimate
    LAST_CHILD_SECONDS=$(( (SECONDS - started) / (repeats * $(count "$strategies") * $(count "$models")) + 1 ))
    echo "   exit $rc (${LAST_CHILD_SECONDS}s per run)"
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && note "bench run $label stopped at its ${secs}s limit: its table is partial"
    for newest in "$RESULTS"/*/*.jsonl; do  # the file this run wrote
        [ -f "$newest" ] && ! grep -q -x -F -- "$newest" <<< "$before" \
            && cat "$newest" >> "$OUT/results-$shapes.jsonl"
    done
    grep -v '%|' "$OUT/summary-$shapes.txt" | tail -20
}

left() { echo $((SECONDS_ALLOWED - SECONDS - SUMMARY_SECONDS)); }

main() {
    cd "$DC_ROOT" || exit 2
    OUT=${OUT:-$DC_ROOT/device-check-out}
    SMALL=${DEVICE_CHECK_SMALL:-sa3}
    LARGE=${DEVICE_CHECK_LARGE:-llama3-8b}
    PY=${PYTHON:-python3}
    SECONDS_ALLOWED=${DEVICE_CHECK_SECONDS:-540}
    SUMMARY_SECONDS=15
    CHILD_TIMEOUT=300
    WHEEL_LIST=${DEVICE_CHECK_WHEEL_LIST:-$DC_ROOT/scripts/device-check-wheels.txt}
    INDEX=${DEVICE_CHECK_INDEX-/opt/pypi/simple}
    [ -d "$INDEX" ] || INDEX=""
    export LOADBENCH_CACHE=${LOADBENCH_CACHE:-/tmp/loadbench-cache}
    export PYTHONUNBUFFERED=1
    mkdir -p "$OUT" || exit 2
    exec > >(tee -a "$OUT/device-check.log") 2>&1
    WORK=$(mktemp -d /tmp/device-check.XXXXXX)
    NOTES=$WORK/notes.md
    : > "$NOTES"

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
    LB=("$PY" -m bench.cli)
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

    # 3. the matrix's strategies, the CUDA-only peers left out elsewhere with their reason
    local strategies large_strategies port_strategies dtype_strategies small_models large_models
    strategies=${DEVICE_CHECK_STRATEGIES:-$(platform_default "$PLATFORM" \
        pipelined,mmap-put,builder,hostcast,zerocopy,orbax-safetensors \
        pipelined,zerocopy,hostcast,eager,runai,fastsafetensors,instanttensor \
        pipelined,zerocopy,hostcast,eager,runai,fastsafetensors,instanttensor)}
    large_strategies=${DEVICE_CHECK_LARGE_STRATEGIES:-$(platform_default "$PLATFORM" \
        pipelined,mmap-put "$(without "$strategies" eager)" "$(without "$strategies" eager)")}
    port_strategies=${DEVICE_CHECK_PORT_STRATEGIES:-pipelined}
    dtype_strategies=${DEVICE_CHECK_DTYPE_STRATEGIES:-pipelined}
    small_models=${DEVICE_CHECK_SMALL_MODELS:-$(platform_default "$PLATFORM" spec spec,transposed spec,transposed)}
    large_models=${DEVICE_CHECK_LARGE_MODELS:-spec,port}
    local kept reasons
    for var in strategies large_strategies port_strategies dtype_strategies; do
        kept=$(keep_strategies "$PY" "$PLATFORM" "${!var}" 2> "$WORK/skipped") || fail "cannot read the strategy registry"
        while read -r reasons; do [ -z "$reasons" ] || note "$reasons"; done < <(sort -u "$WORK/skipped")
        printf -v "$var" '%s' "$kept"
    done
    local cost large_cost port_cost slow
    cost=${DEVICE_CHECK_CHILD_SECONDS:-$(platform_default "$PLATFORM" 24 15 6)}
    large_cost=${DEVICE_CHECK_LARGE_CHILD_SECONDS:-$(platform_default "$PLATFORM" 33 30 8)}
    port_cost=${DEVICE_CHECK_PORT_CHILD_SECONDS:-$(platform_default "$PLATFORM" 45 40 10)}
    slow=${DEVICE_CHECK_SLOW:-eager,builder,hostcast,orbax-safetensors}
    [ -e /proc/sys/vm/drop_caches ] || note "cold page cache: /proc/sys/vm/drop_caches does not exist on this host, so the page cache cannot be dropped; every row here is warm (no cold table)"

    # 4. synthesize the checkpoints (once; kept in $LOADBENCH_CACHE); the large one beside the probe
    synth() {  # SHAPES
        "$PY" -c "import sys; from pathlib import Path; from bench.run.matrix import Checkpoint; ck = Checkpoint.ensure(sys.argv[1], None, 0, Path(sys.argv[2]), 900); print(ck.path, ck.checkpoint_bytes, 'bytes')" "$1" "$LOADBENCH_CACHE" > "$WORK/ck-$1" 2>&1
    }
    step "synthesize $SMALL"
    synth "$SMALL" || { cat "$WORK/ck-$SMALL"; fail "cannot synthesize $SMALL"; }
    cat "$WORK/ck-$SMALL"
    local large_pid=""
    if [ "$LARGE" != "$SMALL" ]; then
        step "synthesize $LARGE (in the background, while the probe runs)"
        synth "$LARGE" &
        large_pid=$!
    fi

    # 5. the bench's own probe (host -> device by piece size, pinned and pageable; the page
    # cache into fresh and into reused memory; the disk), kept in the results folder so that
    # every bench run below holds its rows against it instead of probing again
    RESULTS=$WORK/results
    local probe_size
    probe_size=$(probe_bytes "$PY" "$SMALL" "$LARGE")
    step "probe ($probe_size bytes: the bench's ceilings for $SMALL and $LARGE)"
    [ -z "$large_pid" ] || note "the probe ran while $LARGE was being synthesized (one core writing): its figures may be low"
    timeout --kill-after=10 "${DEVICE_CHECK_PROBE_SECONDS:-240}" "${LB[@]}" probe --size "${probe_size}B" \
        --results "$RESULTS" --out "$OUT/probe.json" || note "the probe failed or ran out of time: the rows go without a ceiling"
    if [ -n "$large_pid" ]; then
        step "synthesize $LARGE: waiting for it"
        wait "$large_pid" || { cat "$WORK/ck-$LARGE"; fail "cannot synthesize $LARGE"; }
        cat "$WORK/ck-$LARGE"
    fi

    # 6. the benches, planned against the time left: the reserved later steps first
    local dtype=${DEVICE_CHECK_MODEL_DTYPE-bfloat16} dtype_repeats=${DEVICE_CHECK_DTYPE_REPEATS:-2}
    local large_repeats=${DEVICE_CHECK_LARGE_REPEATS:-1}
    local small_ports large_ports large_reserve reserve plan repeats chosen secs
    small_ports=$(without "$small_models" spec)
    large_ports=$(without "$large_models" spec)
    [ -z "$dtype" ] && dtype_strategies=""
    large_reserve=$(( large_repeats * (large_cost * $(count "$large_strategies") \
        + port_cost * $(count "$large_ports") * $(count "$port_strategies")) ))
    reserve=$(( cost * dtype_repeats * $(count "$dtype_strategies") + large_reserve ))
    plan=$(fit_matrix $(( $(left) - reserve )) "$cost" "${DEVICE_CHECK_REPEATS:-3}" "$strategies" "$slow" 2> "$WORK/cut")
    while read -r reasons; do [ -z "$reasons" ] || note "$SMALL: $reasons (${reserve}s kept for the steps after it)"; done < "$WORK/cut"
    repeats=${plan%% *} chosen=${plan#* }
    if [ "$repeats" -ge 1 ]; then
        secs=$(( repeats * cost * $(count "$chosen") + 60 ))
        bench "$SMALL" "$SMALL" "$repeats" "$chosen" spec "$secs"
        cost=$LAST_CHILD_SECONDS  # measured: the rest is planned with it
        if [ -n "$small_ports" ] && [ -n "$port_strategies" ]; then
            plan=$(fit_matrix $(( ($(left) - reserve) / $(count "$small_ports") )) "$cost" "$repeats" "$port_strategies" "" 2> /dev/null)
            if [ "${plan%% *}" -ge 1 ]; then
                bench "$SMALL ports" "$SMALL" "${plan%% *}" "${plan#* }" "$small_ports" \
                    $(( ${plan%% *} * cost * $(count "$port_strategies") * $(count "$small_ports") + 60 ))
            else
                note "$SMALL: the ports ($small_ports) left out: $(left)s left"
            fi
        fi
    fi
    if [ -n "$dtype_strategies" ]; then
        plan=$(fit_matrix $(( $(left) - large_reserve )) "$cost" "$dtype_repeats" "$dtype_strategies" "" 2> "$WORK/cut")
        while read -r reasons; do [ -z "$reasons" ] || note "$SMALL into $dtype: $reasons"; done < "$WORK/cut"
        if [ "${plan%% *}" -ge 1 ]; then
            bench "$SMALL into $dtype" "$SMALL" "${plan%% *}" "${plan#* }" spec \
                $(( ${plan%% *} * cost * $(count "${plan#* }") + 60 )) --model-dtype "$dtype"
        fi
    fi
    if [ -n "$large_strategies" ]; then
        # more repeats of the large set where the time allows (up to 3), its ports kept in view
        local port_runs ports_kept
        port_runs=$(( $(count "$large_ports") * $(count "$port_strategies") ))
        plan=$(plan_large "$(left)" "$large_cost" "$large_repeats" "$large_strategies" "$slow" "$port_runs" "$port_cost" 2> "$WORK/cut")
        while read -r reasons; do [ -z "$reasons" ] || note "$LARGE: $reasons"; done < "$WORK/cut"
        ports_kept=${plan##* } plan=${plan% *}
        repeats=${plan%% *}
        if [ "$repeats" -ge 1 ]; then
            bench "$LARGE" "$LARGE" "$repeats" "${plan#* }" spec $(( repeats * large_cost * $(count "${plan#* }") + 60 ))
        fi
        if [ "$ports_kept" = 1 ] && [ -n "$large_ports" ] && [ -n "$port_strategies" ]; then
            plan=$(fit_matrix "$(left)" "$port_cost" "$((repeats > 0 ? repeats : 1))" "$port_strategies" "" 2> /dev/null)
            if [ "${plan%% *}" -ge 1 ]; then
                bench "$LARGE ports" "$LARGE" "${plan%% *}" "${plan#* }" "$large_ports" \
                    $(( ${plan%% *} * port_cost * port_runs + 60 ))
            else
                note "$LARGE: the ports ($large_ports) left out: $(left)s left, ${port_cost}s per run"
            fi
        fi
    fi

    # 7. the summary: host peak, device peak, GB/s, the targets checked, and what was left out
    step "summary"
    timeout 60 "$PY" scripts/device_check_report.py "$OUT/summary.md" "$OUT"/results-*.jsonl || echo "report failed"
    if [ -s "$NOTES" ]; then
        { echo; echo "## Notes (device-check.sh, platform $PLATFORM, ${SECONDS}s)"; cat "$NOTES"; } >> "$OUT/summary.md"
        cat "$NOTES"
    fi
    rm -rf "$WORK"
    step "done: $OUT"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    main "$@"
fi
