# Thin wrapper over CMake.  The two set-up commands of the README:
#   make demo    install what is missing, build, run the main job
#   make check   install what is missing, build, run the whole test suite
#                (normal build with -Werror, then the ASan+UBSan build)
# Others: make build, make python (the Python package in build/venv),
# make tsan (ThreadSanitizer over the runtime's tests),
# make fuzz (10^7 executions per libFuzzer target; FUZZ_RUNS / FUZZ_SECONDS
# change the budget, FUZZ_ONLY one target, FUZZ_JOBS workers), make soak
# (randomized all-reduces under fault injection, 30 min; SOAK_MINUTES),
# make bench (core and point-to-point),
# make bench-allreduce (dlcp vs Gloo and Open MPI), make bench-sim
# (dlcp-sim vs ns-3, and its cost per packet-hop from 16 to 1,024 hosts;
# not part of check or CI), make bench-testbed (dlcp vs Gloo and Open MPI on an
# emulated 4-host cluster, root), make results (the seeds' simulated
# experiments, regenerating docs/results.md), make train-fashion-mnist (the
# PyTorch example: Gloo vs dlcp), make bench-ina (the aggregation switch),
# make bench-ina-single, bench-ina-jobs and bench-cina (INA on the testbed,
# root), make bench-background (dlcp's ring, Gloo, INA and PANAMA beside
# background TCP flows on the testbed, root), make bench-background-racks
# (two jobs across 2 racks, INA up a tree per spine, root),
# make clean.

BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_RUNS    ?= 10000000
FUZZ_SECONDS ?= 0
CMAKE_GEN  := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

# Debian packages the build, the tests and the tools need (README says why).
DEB_PACKAGES := cmake make gcc clang libclang-rt-14-dev llvm pkg-config \
                libcmocka-dev libyaml-dev iproute2 ninja-build \
                python3 libbpf-dev bpftool ethtool util-linux libsodium-dev \
                g++ python3-venv python3-pip python3-setuptools python3-wheel \
                python3-dev python3-numpy python3-pytest python3-torch \
                libtorch-dev pybind11-dev openmpi-bin mpich
# make bench-testbed's peers and plot.
BENCH_TESTBED_PACKAGES := g++ libgloo-dev libopenmpi-dev openmpi-bin \
                          python3-matplotlib
# Only the PyTorch example needs these.
EXAMPLE_DEB_PACKAGES := python3-matplotlib dataset-fashion-mnist

.PHONY: all deps build python demo check test asan tsan fuzz bench bench-allreduce \
        bench-auth bench-sim bench-straggler bench-auto bench-testbed bench-ina bench-ina-single bench-ina-jobs bench-cina bench-background bench-background-racks results \
        soak train-fashion-mnist clean

all: build

deps:
	@./scripts/install-deps.sh $(DEB_PACKAGES)

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DDLCP_WERROR=ON

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The dlcp Python package, pip-installed into $(BUILD)/venv.
python: build
	@./scripts/python-venv.sh $(BUILD)

demo: build python
	@./scripts/demo.sh $(BUILD)

test: build python
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

$(ASAN_BUILD)/CMakeCache.txt:
	cmake -S . -B $(ASAN_BUILD) $(CMAKE_GEN) -DDLCP_WERROR=ON \
	  -DDLCP_ASAN=ON -DDLCP_UBSAN=ON -DCMAKE_BUILD_TYPE=Debug

asan: deps $(ASAN_BUILD)/CMakeCache.txt
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS)

# ThreadSanitizer over the tests whose processes run several threads (the
# runtime: a communicator's loop thread beside the application's, the
# aggregation switch's workers).  Not part of check: about 6 minutes on 2
# cores.
$(TSAN_BUILD)/CMakeCache.txt:
	cmake -S . -B $(TSAN_BUILD) $(CMAKE_GEN) -DDLCP_WERROR=ON \
	  -DDLCP_TSAN=ON -DCMAKE_BUILD_TYPE=Debug

tsan: deps $(TSAN_BUILD)/CMakeCache.txt
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && TSAN_OPTIONS=halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) -R '^(rt_|agg_rt)'

# The sanitizer run comes first so the output ends with the summary of the
# main (optimised, -Werror) build.
check: asan build python
	@echo "== main build: ctest =="
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

$(FUZZ_BUILD)/CMakeCache.txt:
	CC=clang cmake -S . -B $(FUZZ_BUILD) $(CMAKE_GEN) -DDLCP_FUZZ=ON \
	  -DDLCP_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo

fuzz: deps $(FUZZ_BUILD)/CMakeCache.txt
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	@./scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_RUNS) $(FUZZ_SECONDS)

# Randomized all-reduces under fault injection; SOAK_MINUTES, SOAK_RANKS,
# SOAK_SEED etc. as scripts/soak.sh describes.
soak: build
	@./scripts/soak.sh $(BUILD)

bench: build
	@./scripts/bench.sh $(BUILD)

bench-allreduce: build
	@./scripts/bench-allreduce.sh $(BUILD)

# Not part of check or CI: tens of minutes of CPU (ns-3 runs the 144-host
# leaf-spine in several minutes per run).
bench-sim: build
	@./scripts/install-deps.sh g++ libns3-dev ns3 python3-matplotlib
	@./scripts/bench-sim.sh $(BUILD)

bench-auto: build
	@./scripts/bench-auto.sh $(BUILD)

bench-straggler: build
	@./scripts/bench-straggler.sh $(BUILD)

bench-auth: build
	@./scripts/bench-auth.sh $(BUILD)

# Not part of check: minutes of simulation (RESULTS_ARGS=--full: hours).
results: build
	@./scripts/install-deps.sh python3 python3-matplotlib
	/usr/bin/python3 scripts/results/run.py --build $(BUILD) $(RESULTS_ARGS)

# BENCH_TESTBED_QUICK=1 for a smoke run of a few minutes (the report then
# goes to $(BUILD)/bench-testbed/, not docs/).
bench-testbed: build
	@./scripts/install-deps.sh $(BENCH_TESTBED_PACKAGES)
	@/usr/bin/python3 scripts/bench-testbed.py $(BUILD)

train-fashion-mnist: python
	@./scripts/install-deps.sh $(EXAMPLE_DEB_PACKAGES)
	@./scripts/train-fashion-mnist.sh $(BUILD)

bench-ina: build
	@./scripts/bench-ina.sh $(BUILD)

bench-ina-single: build
	@./scripts/install-deps.sh python3
	@/usr/bin/python3 scripts/bench-ina-single.py $(BUILD)

bench-ina-jobs: build
	@./scripts/install-deps.sh python3
	@/usr/bin/python3 scripts/bench-ina-jobs.py $(BUILD)

bench-cina: build
	@./scripts/install-deps.sh python3
	@/usr/bin/python3 scripts/bench-cina.py $(BUILD)

bench-background: build
	@./scripts/install-deps.sh $(BENCH_TESTBED_PACKAGES)
	@/usr/bin/python3 scripts/bench-background.py $(BUILD)

bench-background-racks: build
	@./scripts/install-deps.sh $(BENCH_TESTBED_PACKAGES)
	@/usr/bin/python3 scripts/bench-background.py $(BUILD) --racks 2 \
	    --spines 2 --jobs 2 --ranks 4 --configs none,ring,ina1,ina,panama

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
