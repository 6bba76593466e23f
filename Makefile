# The two commands of the README: `make run` and `make test`.
# Everything else is CMake (build/); this file installs what is missing,
# configures once, and calls it.
BUILD   ?= build
DB      ?= var/attune.db
PORT    ?= 7373
GRID    ?= grids/cpu-small.json
CMAKE_FLAGS ?=
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build run tune test clean reliability fuzz

all: build

deps:
	@scripts/deps.sh

# The flags build/ was configured with are kept in $(BUILD)/cmake-flags:
# CMAKE_FLAGS only apply at the first configure, so a later `make
# CMAKE_FLAGS=...` with others warns instead of silently ignoring them.
FLAGS_Q = '$(subst ','\'',$(strip $(CMAKE_FLAGS)))'

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)
	@printf '%s\n' $(FLAGS_Q) >$(BUILD)/cmake-flags

build: deps $(BUILD)/CMakeCache.txt
	@if [ -f $(BUILD)/cmake-flags ] && [ "$$(cat $(BUILD)/cmake-flags)" != $(FLAGS_Q) ]; then \
	    echo "make: warning: $(BUILD)/ was configured with CMAKE_FLAGS='$$(cat $(BUILD)/cmake-flags)'," \
	         "not $(FLAGS_Q): the new flags are NOT applied; 'make clean' first to use them" >&2; \
	fi
	cmake --build $(BUILD) -j $(JOBS)

# Start attuned on 127.0.0.1:$(PORT) with an embedded SQLite database; on
# its first start it tunes the default grid in the background.
run: build
	@mkdir -p $(dir $(DB))
	@if [ -x $(BUILD)/attuned ]; then \
	    echo "attune: dashboard at http://127.0.0.1:$(PORT)/ (API under /v1/, docs/api.md)"; \
	    exec $(BUILD)/attuned --db $(DB) --port $(PORT) --default-grid $(GRID); \
	else \
	    echo "attuned was not built (libmicrohttpd missing?); tuning offline instead" >&2; \
	    $(BUILD)/attune tune --db $(DB) --device cpu --grid $(GRID) && \
	    $(BUILD)/attune winners --db $(DB) --device cpu; \
	fi

# Offline: tune the CPU grid into $(DB) and print every shape's winner.
tune: build
	@mkdir -p $(dir $(DB))
	$(BUILD)/attune tune --db $(DB) --device cpu --grid $(GRID)
	@$(BUILD)/attune winners --db $(DB) --device cpu

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

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
