#!/bin/sh
# Builds the ns-3 halves of the simulator comparisons against Debian's ns-3
# (libns3-dev 3.37):
#   bench/ns3/build.sh OUT_DIR
# bench/ns3/dctcp_star.cc (16 hosts on one switch) and
# bench/ns3/dctcp_leaf_spine_ps.cc (the 144-host leaf-spine PS scenario).
# The programs are C++ and need ns-3, so they are built here rather than by
# CMake (which builds only the C project).  Prints the two binaries' paths,
# one per line.  Install ns-3 with
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
# libgsl, whose -dev package the programs do not need.
for prog in dctcp_star dctcp_leaf_spine_ps; do
  if [ ! "$out/$prog" -nt "$here/$prog.cc" ] ||
     [ ! "$out/$prog" -nt "$here/dctcp_defaults.h" ]; then
    g++ -O2 -std=c++17 -Wall -Wextra \
      -o "$out/$prog" "$here/$prog.cc" \
      -lns3-applications -lns3-traffic-control -lns3-point-to-point \
      -lns3-internet -lns3-network -lns3-core
  fi
  echo "$out/$prog"
done
