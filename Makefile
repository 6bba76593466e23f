# The two commands of the README: `make run` and `make test`.
# Everything else is CMake (build/); this file installs what is missing,
# configures once, and calls it.
BUILD   ?= build
DB      ?= var/attune.db
PORT    ?= 7373
GRID    ?= grids/cpu-small.json
CMAKE_FLAGS ?=
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps deps-build build host-build run tune test clean reliability fuzz

all: build

deps:
	@scripts/deps.sh

# what building needs, not the tests' npm package (make run, make tune)
deps-build:
	@ATTUNE_NPM=0 scripts/deps.sh

# The flags a tree was configured with are kept in <tree>/cmake-flags:
# CMAKE_FLAGS only apply at the first configure, so a later `make
# CMAKE_FLAGS=...` with others warns instead of silently ignoring them
# (scripts/build_tree.sh). Build steps print one line each, their output
# in <tree>/configure.log and build.log (scripts/quiet.sh; ATTUNE_VERBOSE=1
# prints it all).
FLAGS_Q = '$(subst ','\'',$(strip $(CMAKE_FLAGS)))'
# Compiles go through ccache when it is installed (scripts/ccache.sh: a
# fresh clone reuses what an earlier one compiled, every kernel included),
# in the trees configured here and in those tests configure for themselves
# (fuzz, cross: CMake reads CMAKE_<LANG>_COMPILER_LAUNCHER from the
# environment at a tree's first configure). ATTUNE_CCACHE=0 leaves it out.
ATTUNE_CCACHE ?= 1
LAUNCH = $(if $(filter 1,$(ATTUNE_CCACHE)),$(if $(shell command -v ccache),$(CURDIR)/scripts/ccache.sh))
LAUNCH_ENV = $(if $(LAUNCH),CMAKE_C_COMPILER_LAUNCHER=$(LAUNCH) CMAKE_CUDA_COMPILER_LAUNCHER=$(LAUNCH))
BUILD_TREE = $(LAUNCH_ENV) JOBS=$(JOBS) scripts/build_tree.sh

build: deps
	@$(BUILD_TREE) $(BUILD) $(FLAGS_Q) ''

# The tree of the programs this host runs: $(BUILD) on a host with an
# NVIDIA GPU; on one without, $(CPU_BUILD), configured without CUDA: the
# daemon there could not run a CUDA kernel, and compiling them all is most
# of a cold build (~100 s of 130 on 2 cores). `make test` builds and
# checks every kernel in $(BUILD). HOST_BUILD=$(BUILD) overrides.
CPU_BUILD ?= $(BUILD)/cpu-only
HOST_GPU = $(shell nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && echo yes)
HOST_BUILD ?= $(if $(HOST_GPU),$(BUILD),$(CPU_BUILD))
HOST_FLAGS = $(if $(filter $(CPU_BUILD),$(HOST_BUILD)),-DATTUNE_WITH_CUDA=OFF -DBUILD_TESTING=OFF)

host-build: deps-build
	@$(if $(HOST_FLAGS),echo "attune: no GPU on this host: attuned without the CUDA backend" \
	    "($(CPU_BUILD)); make test builds and checks every CUDA kernel")
	@$(BUILD_TREE) $(HOST_BUILD) $(FLAGS_Q) '$(HOST_FLAGS)' attune_programs

# Start attuned on 127.0.0.1:$(PORT) with an embedded SQLite database; on
# its first start it tunes the default grid in the background.
run: host-build
	@mkdir -p $(dir $(DB))
	@if [ -x $(HOST_BUILD)/attuned ]; then \
	    echo "attune: starting attuned on http://127.0.0.1:$(PORT)/ (dashboard; API under /v1/, docs/api.md); up at its event=ready line"; \
	    exec $(HOST_BUILD)/attuned --db $(DB) --port $(PORT) --default-grid $(GRID); \
	else \
	    echo "attuned was not built (libmicrohttpd missing?); tuning offline instead" >&2; \
	    $(HOST_BUILD)/attune tune --db $(DB) --device cpu --grid $(GRID) && \
	    $(HOST_BUILD)/attune winners --db $(DB) --device cpu; \
	fi

# Offline: tune the CPU grid into $(DB) and print every shape's winner.
tune: host-build
	@mkdir -p $(dir $(DB))
	$(HOST_BUILD)/attune tune --db $(DB) --device cpu --grid $(GRID)
	@$(HOST_BUILD)/attune winners --db $(DB) --device cpu

# Everything, every CUDA kernel for this build's architectures and the
# architecture check's (attune_arch_check) in one make, then ctest, three
# tests per core (tests/schedule.cmake); the summary counts skipped tests
# apart and says why each was skipped (scripts/test_summary.sh). Beside
# that make and then beside ctest, at nice 10, the trees fuzz_smoke and
# it_cross_arm64 build for themselves (scripts/test_trees.sh: in the cores
# the main build and the waiting tests leave idle). The trees' job holds
# BUILD/test-trees.lock, taken here before it starts, until it ends; those
# two tests start under a shared lock of it (tests/CMakeLists.txt), so
# they find their trees built. What each step costs: docs/build.md.
test: deps
	@t0=$$(date +%s); mkdir -p $(BUILD); exec 9>$(BUILD)/test-trees.lock; \
	command -v flock >/dev/null 2>&1 && flock 9; \
	$(LAUNCH_ENV) JOBS=$(JOBS) nice -n 10 scripts/quiet.sh "test trees (fuzz, arm64)" \
	    $(BUILD)/test-trees.log scripts/test_trees.sh $(BUILD) >$(BUILD)/test-trees.line & trees=$$!; \
	exec 9>&-; \
	$(BUILD_TREE) $(BUILD) $(FLAGS_Q) '' all attune_arch_check; rc=$$?; \
	if [ $$rc -eq 0 ]; then $(LAUNCH_ENV) scripts/test_summary.sh $(BUILD) $(JOBS) $$t0; rc=$$?; fi; \
	wait $$trees; cat $(BUILD)/test-trees.line; exit $$rc

# The reliability campaign, long versions (docs/reliability.md): crash
# loops (REL_N kills of each kind), the malformed-request battery, 1,000 slow
# clients, lookups at 16 connections with a job writing. Prints figures;
# latency goals are asserted here (--strict), not in `make test`.
REL_N ?= 50
reliability: build
	@env ATTUNED_BIN=$(abspath $(BUILD))/attuned ATTUNE_BIN=$(abspath $(BUILD))/attune \
	    LOOKUP_LOAD=$(abspath $(BUILD))/tests/lookup_load tests/reliability/run_all.sh $(REL_N)

# libFuzzer: every harness of fuzz/ for FUZZ_SECONDS from its seed corpus
# (clang ASan+UBSan build in build-asan/).
FUZZ_SECONDS ?= 600
fuzz: deps
	fuzz/run.sh $(FUZZ_SECONDS) $(CURDIR)/build-asan

clean:
	rm -rf $(BUILD)
