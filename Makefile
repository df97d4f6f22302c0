# The two commands: `make demo` and `make test`. Both install what is missing.
CACHE ?= $(or $(TANDEM_CACHE),$(HOME)/.cache/tandem)
PY := $(CACHE)/venv/bin/python
BUILD ?= build
JOBS ?= $(shell nproc)
DEMO_PROMPT ?= What are three good reasons to learn to cook at home? Answer briefly.

.PHONY: all setup build models demo test bench sanitize clean

all: build

setup:
	@TANDEM_CACHE=$(CACHE) scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DTANDEM_PYTHON=$(PY) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

models: setup
	@TANDEM_CACHE=$(CACHE) $(PY) scripts/fetch_models.py all

demo: build models
	@$(BUILD)/tandem generate -m $(CACHE)/models/smollm2-135m-instruct-q4_1.gguf --chat \
	  -n 160 -p "$(DEMO_PROMPT)"

test: build models
	@cd $(BUILD) && TANDEM_CACHE=$(CACHE) TANDEM_PYTHON=$(PY) ctest --output-on-failure -j 2 --timeout 900

# The test suite under AddressSanitizer and UndefinedBehaviorSanitizer.
sanitize: setup models
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_SANITIZE=ON -DTANDEM_PYTHON=$(PY) >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && TANDEM_CACHE=$(CACHE) TANDEM_PYTHON=$(PY) ctest --output-on-failure -j 2 --timeout 1800

clean:
	rm -rf $(BUILD) build-asan
