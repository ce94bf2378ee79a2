# The README's quick start: `make demo` and `make test`. Everything else is plumbing.
BUILD   ?= build
SAN     ?= build-san
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=

# Quiet: no "Entering directory" lines from the build's own makes; scripts/progress-only.sh
# keeps one line per file compiled and one per 10% of the tests, then the summary.
MAKEFLAGS += --no-print-directory
# ccache hits in any checkout: paths under the checkout are hashed relative to it.
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= true
QUIET   := scripts/progress-only.sh

.PHONY: all deps configure build build-tool demo test test-sanitize bench clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: configure
	@$(QUIET) build cmake --build $(BUILD) -j $(JOBS)

# Only the command-line tool (what the demo runs): no tests, benchmarks or Python module.
build-tool: configure
	@$(QUIET) build cmake --build $(BUILD) -j $(JOBS) --target fpgallm

# The main job: quantize, plan for an Alveo U280, simulate, emit the HLS project, verify
# through the kernels and write out/demo/report.html.
demo: build-tool
	@echo "fpgallm deploy models/stories260K.bin --device u280 -o out/demo"
	@./$(BUILD)/fpgallm deploy models/stories260K.bin --device u280 -o out/demo

test: build
	@$(QUIET) test ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The same suite under AddressSanitizer and UndefinedBehaviorSanitizer (tests labelled
# "nosan" are skipped: they time long runs or load libraries that ASan cannot host).
test-sanitize: deps
	@cmake --preset sanitize >/dev/null
	@$(QUIET) build cmake --build $(SAN) -j $(JOBS)
	@$(QUIET) test ctest --test-dir $(SAN) --output-on-failure -j $(JOBS) -LE nosan

bench: build
	bench/run.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(SAN)
