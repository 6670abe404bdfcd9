#!/usr/bin/env bash
# A Python virtual environment at DIR holding the pinned packages PINS ("name==version ..."),
# made again from python3 whenever DIR/pins differs from PINS (scripts/test_python.sh's and
# scripts/fuzz.sh's environments).
#
# Usage: scripts/pinned_venv.sh DIR "PINS"
set -euo pipefail
venv=$1
pins=$2
if [ "$(cat "$venv/pins" 2>/dev/null)" != "$pins" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    # shellcheck disable=SC2086
    "$venv/bin/pip" install --quiet --disable-pip-version-check $pins
    echo "$pins" > "$venv/pins"
fi
