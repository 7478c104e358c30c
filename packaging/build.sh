#!/usr/bin/env bash
# Build the standalone one-folder bundle dist/attn-explorer/ (executable dist/attn-explorer/attn-explorer)
# from a clean venv, then run its self-test.
#
#   packaging/build.sh                 # uses python3; PYTHON=/path/to/python3.11 to choose
#   BUILD_DIR=/tmp/b DIST_DIR=/tmp/d packaging/build.sh
#
# Exit status: 0 built and self-tested; 75 pip could not install the build's packages
# (no network or no index: tests/test_bundle.py skips on this); anything else is a failure.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PYTHON=${PYTHON:-python3}
BUILD_DIR=${BUILD_DIR:-$ROOT/build/bundle}
DIST_DIR=${DIST_DIR:-$ROOT/dist}
VENV=$BUILD_DIR/venv
SRC=$BUILD_DIR/src
start=$(date +%s)

echo "build.sh: clean venv in $VENV"
rm -rf "$VENV" "$SRC" "$BUILD_DIR/work" "$DIST_DIR/attn-explorer"
mkdir -p "$BUILD_DIR" "$DIST_DIR"
"$PYTHON" -m venv "$VENV"

# Install from a fresh copy of the checkout: setuptools reuses build/lib inside the source
# folder, so files deleted from the tree could otherwise linger in the bundle.
tar -C "$ROOT" --exclude=./build --exclude=./dist --exclude=./.git --exclude=./.venv \
    --exclude=./venv --exclude='*.egg-info' --exclude=__pycache__ --exclude=.pytest_cache \
    --exclude=.hypothesis --exclude=.ruff_cache --exclude=.mypy_cache -cf - . | {
  mkdir -p "$SRC" && tar -C "$SRC" -xf -
}

echo "build.sh: pip install the project, pyinstaller 6 and its hooks"
if ! "$VENV/bin/python" -m pip install -q "$SRC" "pyinstaller==6.*" pyinstaller-hooks-contrib; then
  echo "build.sh: pip could not install the build's packages (network or index unavailable?)" >&2
  exit 75
fi
"$VENV/bin/python" -m pip list 2>/dev/null | grep -iE '^(pyinstaller|pyside6|shiboken6|numpy|pyqtgraph)' | tr -s ' ' | sed 's/^/  /'

installed=$(date +%s)
echo "build.sh: pyinstaller"
"$VENV/bin/pyinstaller" --noconfirm --log-level WARN \
  --distpath "$DIST_DIR" --workpath "$BUILD_DIR/work" "$ROOT/packaging/attn_explorer.spec"
built=$(date +%s)

echo "build.sh: self-test of the bundle"
QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen} "$DIST_DIR/attn-explorer/attn-explorer" --self-test

echo "build.sh: built $DIST_DIR/attn-explorer in $((built - start)) s" \
  "(venv + pip $((installed - start)) s, pyinstaller $((built - installed)) s)," \
  "$(du -sh "$DIST_DIR/attn-explorer" | cut -f1)"
