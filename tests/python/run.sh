#!/bin/sh
# ctest's "python" test: the dlcp package's pytest suite (tests/python),
# run in the venv `make python` installs the package into.  Exits 77
# (ctest: skipped) with the reason when it cannot run.
#   run.sh BUILD_DIR SANITIZED(ON/OFF)
set -eu
build=$1
here=$(cd "$(dirname "$0")" && pwd)
if [ "${2:-OFF}" = ON ]; then
  echo "skipped: sanitizer build (a sanitized libdlcp.so cannot be loaded" \
       "into an uninstrumented Python); the main build runs these tests"
  exit 77
fi
if [ ! -x "$build/venv/bin/python" ]; then
  echo "skipped: no venv at $build/venv; run 'make python' (make check does)"
  exit 77
fi
if [ -n "$(find "$build/lib/libdlcp.so" -newer "$build/venv/.dlcp-installed" 2>/dev/null)" ]; then
  echo "warning: libdlcp.so is newer than the installed package; run 'make python'"
fi
export DLCP_BUILD_DIR="$build"
cd "$here"
exec "$build/venv/bin/python" -m pytest -q -p no:cacheprovider "$here"
