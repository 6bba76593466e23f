# The two commands of the README: `make run` and `make test`.
# Everything else is CMake (build/); this file installs what is missing,
# configures once, and calls it.
BUILD   ?= build
DB      ?= var/attune.db
PORT    ?= 7373
GRID    ?= grids/cpu-small.json
CMAKE_FLAGS ?=
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build run tune test clean

all: build

deps:
	@scripts/deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
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

clean:
	rm -rf $(BUILD)
