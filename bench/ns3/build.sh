#!/bin/sh
# Builds bench/ns3/dctcp_star.cc against Debian's ns-3 (libns3-dev 3.37):
#   bench/ns3/build.sh OUT_DIR
# The program is C++ and needs ns-3, so it is built here rather than by
# CMake (which builds only the C project).  Install ns-3 with
#   apt-get install -y libns3-dev ns3
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-build/bench-ns3}
mkdir -p "$out"
if [ ! -e /usr/include/ns3/core-module.h ]; then
  echo "bench/ns3/build.sh: ns-3 not found; apt-get install -y libns3-dev ns3" >&2
  exit 1
fi
# The libraries are named directly: Debian's ns3-*.pc files also list
# libgsl, whose -dev package the program does not need.
g++ -O2 -std=c++17 \
  -o "$out/dctcp_star" "$here/dctcp_star.cc" \
  -lns3-applications -lns3-traffic-control -lns3-point-to-point \
  -lns3-internet -lns3-network -lns3-core
echo "$out/dctcp_star"
