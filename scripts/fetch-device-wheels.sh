#!/usr/bin/env bash
# Download the pinned wheels of scripts/device-check-wheels.txt (distribution==version lines; the
# unpinned ones come from the host's own index) for a device machine's python, x86-64 manylinux,
# without their dependencies (the list names every one the image lacks):
#
#   scripts/fetch-device-wheels.sh                 # .whl/ for the H200 (python 3.12, CUDA peers too)
#   scripts/fetch-device-wheels.sh .whl-tpu tpu    # .whl-tpu/ for the TPU host (python 3.11)
#
# The second argument is the device's platform (cuda, default; tpu): lines that name other
# platforms are left out. PYTHON_VERSION overrides the python (3.12 for cuda, 3.11 for tpu).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DEST=${1:-.whl}
PLATFORM=${2:-cuda}
PY=${PYTHON:-python3}
case "$PLATFORM" in tpu) version=3.11 ;; *) version=3.12 ;; esac
specs=$(awk -v p="$PLATFORM" '
    /^#/ || NF == 0 || $1 !~ /==/ { next }
    NF >= 3 && index("," $3 ",", "," p ",") == 0 { next }
    { print $1 }' scripts/device-check-wheels.txt)
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
    manylinux_2_12_x86_64 manylinux2010_x86_64 manylinux1_x86_64; do
    platforms+=(--platform "$p")
done
# shellcheck disable=SC2086
"$PY" -m pip download --no-deps --only-binary=:all: --python-version "${PYTHON_VERSION:-$version}" \
    --implementation cp "${platforms[@]}" -d "$DEST" $specs
du -sh "$DEST"
