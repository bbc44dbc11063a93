# rlflow: every target installs what it needs (Debian packages), configures, builds and runs.
#   make demo   run the main example        make test       build everything, run all CPU tests
#   make bench  run the benchmarks           make test-sanitize  the tests under ASan + UBSan
#   make plan ARGS="key=value ..."  print the resource plan of a configuration
#   make gpu-check  on a GPU machine: build + run the CUDA tests, benchmarks and demo, print one table
SHELL := /bin/bash
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
APT := apt-get -o DPkg::Lock::Timeout=600
# Debian packages the build needs (never libthrust-dev / libcub-dev: they shadow the CUDA toolkit's CCCL).
PACKAGES := cmake g++ make pkg-config catch2 libbenchmark-dev libopenblas-dev nlohmann-json3-dev libyaml-cpp-dev libboost-dev
NVCC := $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
CMAKE_FLAGS ?=
ifneq ($(NVCC),)
CUDA_FLAGS := -DCMAKE_CUDA_COMPILER=$(NVCC) -DCMAKE_CUDA_ARCHITECTURES=90
endif
# Tests labelled 'cuda' run only where a GPU answers; 'long' ones only on request (make test-long).
HAVE_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)
ifeq ($(HAVE_GPU),yes)
CTEST_EXCLUDE := long
else
CTEST_EXCLUDE := cuda|long
endif
DEMO ?= 00_grpo_reverse
DEMO_ARGS ?=
# The built-in model is small: one BLAS thread per worker thread is fastest (and the trainer
# already runs one worker thread per device).
RUN_ENV := OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

.PHONY: all deps configure build test test-sanitize test-long demo bench plan gpu-check clean

all: build

deps:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $(APT) update -qq && $(APT) install -y -qq --no-install-recommends $$missing; \
	fi

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CUDA_FLAGS) $(CMAKE_FLAGS)

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j$(JOBS)

test: build
	cd $(BUILD) && $(RUN_ENV) ctest --output-on-failure -j$(JOBS) -LE "$(CTEST_EXCLUDE)"

test-long: build
	cd $(BUILD) && $(RUN_ENV) ctest --output-on-failure -L long

test-sanitize: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
	  -DRLFLOW_SANITIZE=ON -DRLFLOW_ENABLE_CUDA=OFF -DRLFLOW_BUILD_BENCHMARKS=OFF -DRLFLOW_BUILD_EXAMPLES=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && $(RUN_ENV) ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j$(JOBS) -LE "cuda|long|compile_fail|install|nosan"

demo: configure
	cmake --build $(BUILD) -j$(JOBS) --target $(DEMO)
	$(RUN_ENV) ./$(BUILD)/examples/$(DEMO) $(DEMO_ARGS)

bench: build
	@for b in $$(find $(BUILD)/benchmarks -type f -executable -name 'bench_*' | sort); do \
	  echo "== $$b"; $$b --benchmark_min_time=0.2 $(BENCH_ARGS) || exit 1; done

plan: configure
	cmake --build $(BUILD) -j$(JOBS) --target rlflow_plan
	./$(BUILD)/examples/rlflow_plan $(ARGS)

# One run (<= 8 min) on a GPU machine: tools/gpu_check.sh (docs/development.md). GPU_CHECK_ARGS: --steps N ...
gpu-check: deps
	tools/gpu_check.sh $(GPU_CHECK_ARGS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
