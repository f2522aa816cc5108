#!/usr/bin/env bash
# Download the wheels of scripts/device-check-wheels.txt into .whl/ (git-ignored) for the device
# machine's python (3.12, x86-64 manylinux; PYTHON_VERSION=3.11 for this machine's own), without
# their dependencies (the list names every one the image lacks).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DEST=${1:-.whl}
PY=${PYTHON:-python3}
specs=$(grep -v '^#' scripts/device-check-wheels.txt | awk 'NF {print $1}')
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
    platforms+=(--platform "$p")
done
# shellcheck disable=SC2086
"$PY" -m pip download --no-deps --only-binary=:all: --python-version "${PYTHON_VERSION:-3.12}" \
    --implementation cp "${platforms[@]}" -d "$DEST" $specs
du -sh "$DEST"
