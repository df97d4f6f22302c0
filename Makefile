# The two commands: `make demo` and `make test`. Both install what is missing.
CACHE ?= $(or $(TANDEM_CACHE),$(HOME)/.cache/tandem)
PY := $(CACHE)/venv/bin/python
BUILD ?= build
JOBS ?= $(shell nproc)
DEMO_PROMPT ?= What are three good reasons to learn to cook at home? Answer briefly.

# Warnings are errors in the suite's build (`make test`, and so CI); other targets
# leave the build directory's setting as it is (changing it rebuilds everything).
WERROR ?=
# `make fuzz`: seconds per fuzz target, and (when not 0) executions per target.
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?= 0

.PHONY: all setup build models demo test bench sanitize tsan fuzz soak gpu-bundle clean

all: build

setup:
	@TANDEM_CACHE=$(CACHE) scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(if $(WERROR),-DTANDEM_WERROR=$(WERROR)) -DTANDEM_PYTHON=$(PY) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

models: setup
	@TANDEM_CACHE=$(CACHE) $(PY) scripts/fetch_models.py all

demo: build models
	@$(BUILD)/tandem generate -m $(CACHE)/models/smollm2-135m-instruct-q4_1.gguf --chat \
	  -n 160 -p "$(DEMO_PROMPT)"

test: WERROR = ON
test: build models
	@cd $(BUILD) && TANDEM_CACHE=$(CACHE) TANDEM_PYTHON=$(PY) ctest --output-on-failure -j 2 --timeout 900

# The test suite under AddressSanitizer and UndefinedBehaviorSanitizer.
sanitize: setup models
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_SANITIZE=ON -DTANDEM_PYTHON=$(PY) >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && TANDEM_CACHE=$(CACHE) TANDEM_PYTHON=$(PY) ctest --output-on-failure -j 2 --timeout 1800

# The concurrent parts (engine thread, async front, HTTP threads, thread pool)
# under ThreadSanitizer: their unit tests, the server tests (structured outputs
# and the web page's stream included) and 3 minutes of the soak test (its heap slope is not judged: TSan's allocator hides the heap), in
# build-tsan/. A race report fails the run (halt_on_error).
TSAN_TESTS := ThreadPool|AsyncEngine|^Engine\.|SpeculativeEngine\.Batched|ServerPlumbing|py_test_server|py_test_structured_outputs|py_test_web_page
tsan: setup models
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_TSAN=ON -DTANDEM_PYTHON=$(PY) >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target tandem kernels_ops_test engine_test async_engine_test spec_engine_test server_plumbing_test
	@cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" TANDEM_CACHE=$(CACHE) \
	  TANDEM_PYTHON=$(PY) ctest --output-on-failure -j 2 --timeout 1800 -R '$(TSAN_TESTS)'
	@TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/tests/tsan.supp" TANDEM_BIN=build-tsan/tandem \
	  TANDEM_CACHE=$(CACHE) $(PY) tests/python/soak.py --minutes 3 --pause-every 60 --max-heap-slope 1e9

# Every fuzz target under libFuzzer (clang, ASan + UBSan) for FUZZ_SECONDS each.
fuzz: setup models
	@TANDEM_CACHE=$(CACHE) TANDEM_PYTHON=$(PY) scripts/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_RUNS)

# The soak test at full length (tests/python/soak.py; `make test` runs a short one).
SOAK_MINUTES ?= 30
soak: build models
	@TANDEM_BIN=$(BUILD)/tandem TANDEM_CACHE=$(CACHE) $(PY) tests/python/soak.py \
	  --minutes $(SOAK_MINUTES) --json $(BUILD)/soak.json

# The folder to copy to the GPU machine: tandem, the CUDA tests, their libraries
# and scripts/gpu_check.sh (docs/cuda.md). Needs nvcc here (the CUDA kernels
# build wherever it is found).
GPU_BUNDLE ?= $(BUILD)/gpu-bundle
gpu-bundle: build
	@scripts/gpu_bundle.sh $(BUILD) $(GPU_BUNDLE)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
