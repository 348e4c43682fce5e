#!/bin/sh
# Sets up the Python package for `make python` (run by make demo and make
# check): a venv in BUILD/venv that sees Debian's packages (python3-torch,
# numpy, matplotlib, pytest: --system-site-packages, since Debian 12 marks
# the system Python as externally managed, PEP 668), with python/
# pip-installed into it offline (--no-build-isolation --no-deps: Debian's
# setuptools and wheel build it; nothing is fetched from PyPI).  Reinstalls
# only when libdlcp.so or a file under python/ changed since the last time.
set -eu
build=$(cd "${1:-build}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
venv=$build/venv
stamp=$venv/.dlcp-installed

if [ ! -x "$venv/bin/python" ]; then
  echo "python-venv: creating $venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
if [ -f "$stamp" ] && [ -z "$(find "$build/lib/libdlcp.so" "$src/python" \
     -newer "$stamp" -type f ! -path '*/__pycache__/*' \
     ! -path "$src/python/build/*" ! -path '*.egg-info/*' | head -n 1)" ]; then
  exit 0
fi
echo "python-venv: installing python/ into $venv (builds the torch backend)"
rm -rf "$src/python/build"
DLCP_BUILD_DIR=$build "$venv/bin/python" -m pip install --quiet \
  --no-build-isolation --no-deps --no-index "$src/python"
rm -rf "$src/python/build" "$src/python"/*.egg-info
touch "$stamp"
