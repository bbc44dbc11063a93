#!/usr/bin/env bash
# tools/gpu_check.sh: the one command a short stay on a GPU machine needs (make gpu-check).
# In one run (target: at most 8 minutes on a 16-core GPU host) it configures build-gpu/ for the
# device's architecture, builds only what the check needs (the 'cuda'-labelled tests, the CUDA
# benchmarks, the CUDA demo), runs `ctest -L 'cuda|gpu_check'` (the cuda-labelled tests and the
# CUDA trainer's pre-work rejections), bench_kernels_cuda, bench_engine_cuda and
# 00_grpo_reverse_cuda for a fixed number of steps (GPT-2, then the built-in Qwen2 model), and
# prints one table:
#   tests passed / failed, GRPO-advantage bandwidth as a fraction of device copy bandwidth
#   (target >= 70%), decode tokens/s with and without the KV cache, forward FLOP/s against cuBLAS
#   sgemm of the same shapes (target >= 50%), the GRPO-shaped rollout (64 prompts x 8 samples,
#   BM_GenerateGroups) through the paged against the static CUDA engine: tokens/s (target >= 2x)
#   and peak KV bytes (target <= 40%), llama.cpp's batched-bench on both engines (S_PP / S_TG
#   tokens/s per PP, TG, B), the demos' score before / after and seconds per step, and
#   nvidia-smi's device name.
# It exits non-zero when any test fails or any stage cannot run. The raw outputs stay in
# <build>/gpu_check/ (ctest.log, bench_kernels.csv, bench_engine.csv, bench_batched.csv,
# demo/metrics.jsonl, demo_qwen2/metrics.jsonl, device.txt).
#
# usage: tools/gpu_check.sh [--build DIR] [--steps N] [--jobs N] [--no-build] [--test-timeout S] [--diagnose]
#        --no-build      use DIR as it is (built elsewhere, e.g. unpacked by tools/gpu_bundle.sh)
#        --test-timeout  per-test limit in seconds for ctest (default 300)
#        --diagnose      after the rest, rerun the first three failed tests under compute-sanitizer
#                        (memcheck, 90 s each) into
#                        <build>/gpu_check/sanitizer_<test>.log
#        tools/gpu_check.sh --parse DIR   # only read DIR's saved outputs and print the table
#                                         # (no GPU needed; the CPU tests use it)
set -uo pipefail

BUILD=build-gpu
STEPS=20
JOBS=$(nproc 2>/dev/null || echo 4)
PARSE=""
NO_BUILD=0
TEST_TIMEOUT=300
DIAGNOSE=0
while (($#)); do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    --parse) PARSE="$2"; shift 2 ;;
    --no-build) NO_BUILD=1; shift ;;
    --test-timeout) TEST_TIMEOUT="$2"; shift 2 ;;
    --diagnose) DIAGNOSE=1; shift ;;
    -h|--help) sed -n '2,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# ---- parsing (pure text; tested on the CPU) ---------------------------------------------------

# csv_value FILE NAME_REGEX COLUMN: the named column of the first benchmark row whose name matches.
csv_value() {
  awk -F, -v pat="$2" -v col="$3" '
    NR == 1 || /^name,/ { for (i = 1; i <= NF; i++) { h = $i; gsub(/"/, "", h); idx[h] = i }; next }
    { n = $1; gsub(/"/, "", n); if (n ~ pat && (col in idx)) { v = $(idx[col]); gsub(/"/, "", v); if (v != "") { print v; exit } } }
  ' "$1" 2>/dev/null
}

# json_series FILE KEY: the values of KEY, one per JSON line, in order.
json_series() {
  sed -n "s|.*\"$2\": *\\([-0-9.eE+]*\\).*|\\1|p" "$1" 2>/dev/null
}

ratio() {  # ratio A B -> "A/B" as a percentage with one decimal, or "n/a"
  awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.1f%%", 100 * a / b }'
}
speedup() {  # speedup A B -> "xA/B" with one decimal, or "n/a"
  awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "x%.1f", a / b }'
}
human() {  # human X UNIT -> 1.23e+09 UNIT, or n/a
  awk -v x="$1" -v u="$2" 'BEGIN { if (x == "") print "n/a"; else printf "%.3g %s", x, u }'
}
num() {  # num X -> 1.23e+09, or n/a
  awk -v x="$1" 'BEGIN { if (x == "") print "n/a"; else printf "%.3g", x }'
}

# report DIR: prints the table from DIR's outputs; returns 0 only when everything passed.
report() {
  local dir="$1" status=0
  local device passed failed total
  device=$(head -n1 "$dir/device.txt" 2>/dev/null)
  [[ -n "$device" ]] || { device="(no nvidia-smi output)"; status=1; }
  # ctest's summary line: "100% tests passed, 0 tests failed out of 7", or without the failed
  # count when none failed ("100% tests passed out of 7", CMake 4's ctest)
  local summary
  summary=$(grep -E "tests passed(, [0-9]+ tests? failed)? out of [0-9]+" "$dir/ctest.log" 2>/dev/null | tail -n1)
  if [[ -n "$summary" ]]; then
    failed=0
    [[ "$summary" =~ ([0-9]+)\ tests?\ failed ]] && failed=${BASH_REMATCH[1]}
    total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$summary")
    passed=$((total - failed))
    ((failed == 0 && total > 0)) || status=1
  else
    passed="?"; failed="?"; total="?"; status=1
  fi
  # bandwidth: the largest GRPO case (rows 1M, group 8, len 256) against a copy of the same bytes
  local grpo copy
  grpo=$(csv_value "$dir/bench_kernels.csv" '^BM_GRPOAdvantage/rows:1048576/group:8/len:256' 'GB/s')
  copy=$(csv_value "$dir/bench_kernels.csv" '^BM_Memcpy/rows:1048576/group:8/len:256' 'GB/s')
  [[ -n "$grpo" && -n "$copy" ]] || status=1
  local kv1 kv0 fwd gemm
  kv1=$(csv_value "$dir/bench_engine.csv" '^BM_Decode/kv:1' 'tokens/s')
  kv0=$(csv_value "$dir/bench_engine.csv" '^BM_Decode/kv:0' 'tokens/s')
  fwd=$(csv_value "$dir/bench_engine.csv" '^BM_Forward' 'FLOP/s')
  gemm=$(csv_value "$dir/bench_engine.csv" '^BM_Sgemm' 'FLOP/s')
  [[ -n "$kv1" && -n "$kv0" && -n "$fwd" && -n "$gemm" ]] || status=1
  local gp gs kp ks
  gp=$(csv_value "$dir/bench_engine.csv" '^BM_GenerateGroups/engine:paged' 'tokens/s')
  gs=$(csv_value "$dir/bench_engine.csv" '^BM_GenerateGroups/engine:static' 'tokens/s')
  kp=$(csv_value "$dir/bench_engine.csv" '^BM_GenerateGroups/engine:paged' 'kv_peak_bytes')
  ks=$(csv_value "$dir/bench_engine.csv" '^BM_GenerateGroups/engine:static' 'kv_peak_bytes')
  [[ -n "$gp" && -n "$gs" && -n "$kp" && -n "$ks" ]] || status=1
  # batched-bench: every configuration the static engine ran, with the paged engine's figures
  local cfgs c bsp bst bpp bpt
  local -a batched=()
  cfgs=$(sed -nE 's|^"BM_BatchedBench/engine:static/(PP:[0-9]+/TG:[0-9]+/B:[0-9]+)/.*|\1|p' "$dir/bench_batched.csv" 2>/dev/null)
  [[ -n "$cfgs" ]] || status=1
  for c in $cfgs; do
    bsp=$(csv_value "$dir/bench_batched.csv" "^BM_BatchedBench/engine:static/$c/" 'S_PP')
    bst=$(csv_value "$dir/bench_batched.csv" "^BM_BatchedBench/engine:static/$c/" 'S_TG')
    bpp=$(csv_value "$dir/bench_batched.csv" "^BM_BatchedBench/engine:paged/$c/" 'S_PP')
    bpt=$(csv_value "$dir/bench_batched.csv" "^BM_BatchedBench/engine:paged/$c/" 'S_TG')
    [[ -n "$bsp" && -n "$bst" && -n "$bpp" && -n "$bpt" ]] || status=1
    batched+=("$(printf '%-44s %s' "batched-bench ${c//\// } S_PP / S_TG" \
      "static $(num "$bsp") / $(num "$bst"), paged $(num "$bpp") / $(num "$bpt") tok/s")")
  done
  ((${#batched[@]})) || batched+=("$(printf '%-44s %s' "batched-bench S_PP / S_TG" "n/a")")
  local scores first last steps sps
  scores=$(json_series "$dir/demo/metrics.jsonl" "critic/score/mean")
  first=$(head -n1 <<<"$scores"); last=$(tail -n1 <<<"$scores")
  steps=$(grep -c . <<<"$scores")
  sps=$(json_series "$dir/demo/metrics.jsonl" "timing_s/step" | awk '{ s += $1; n++ } END { if (n) printf "%.3f", s / n }')
  [[ -n "$first" && -n "$sps" ]] || { status=1; steps=0; }
  [[ -f "$dir/demo.failed" ]] && status=1
  local qscores qfirst qlast qsteps
  qscores=$(json_series "$dir/demo_qwen2/metrics.jsonl" "critic/score/mean")
  qfirst=$(head -n1 <<<"$qscores"); qlast=$(tail -n1 <<<"$qscores")
  qsteps=$(grep -c . <<<"$qscores")
  [[ -n "$qfirst" ]] || { status=1; qsteps=0; }
  [[ -f "$dir/demo_qwen2.failed" ]] && status=1

  printf '%-44s %s\n' "check" "result"
  printf '%-44s %s\n' "--------------------------------------------" "------------------------------"
  printf '%-44s %s\n' "device (nvidia-smi)" "$device"
  printf '%-44s %s\n' "ctest -L cuda: passed / failed (of total)" "$passed / $failed (of $total)"
  # the benchmark's counter is named "GB/s" but holds a rate of bytes (Google Benchmark's kIsRate)
  printf '%-44s %s\n' "GRPO advantage / device copy bandwidth" "$(human "$grpo" B/s) / $(human "$copy" B/s) = $(ratio "$grpo" "$copy") (target >= 70%)"
  printf '%-44s %s\n' "decode tokens/s, KV cache on / off" "$(human "$kv1" tok/s) / $(human "$kv0" tok/s) (x$(awk -v a="$kv1" -v b="$kv0" 'BEGIN { if (a == "" || b + 0 == 0) print "n/a"; else printf "%.1f", a / b }'))"
  printf '%-44s %s\n' "forward FLOP/s / cuBLAS sgemm FLOP/s" "$(human "$fwd" FLOP/s) / $(human "$gemm" FLOP/s) = $(ratio "$fwd" "$gemm") (target >= 50%)"
  printf '%-44s %s\n' "generate groups tokens/s, paged / static" "$(human "$gp" tok/s) / $(human "$gs" tok/s) = $(speedup "$gp" "$gs") (target >= 2x)"
  printf '%-44s %s\n' "peak KV bytes, paged / static" "$(human "$kp" B) / $(human "$ks" B) = $(ratio "$kp" "$ks") (target <= 40%)"
  printf '%s\n' "${batched[@]}"
  printf '%-44s %s\n' "demo critic/score/mean first -> last step" "${first:-n/a} -> ${last:-n/a} ($steps steps)"
  printf '%-44s %s\n' "demo seconds per step (mean)" "${sps:-n/a}"
  printf '%-44s %s\n' "demo, arch=qwen2: score first -> last step" "${qfirst:-n/a} -> ${qlast:-n/a} ($qsteps steps)"
  printf '%-44s %s\n' "overall" "$([[ $status == 0 ]] && echo PASS || echo FAIL)"
  return $status
}

if [[ -n "$PARSE" ]]; then
  report "$PARSE"
  exit $?
fi

# ---- the run (GPU machine) --------------------------------------------------------------------
cd "$(dirname "$0")/.." || exit 2
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no GPU answers nvidia-smi; run this on a GPU machine (CPU checks: make test)" >&2
  exit 2
fi
OUT="$BUILD/gpu_check"
rm -rf "$OUT"
mkdir -p "$OUT/demo" "$OUT/demo_qwen2"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n1 >"$OUT/device.txt"
CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d ' .')
[[ "$CAP" =~ ^[0-9]+$ ]] || CAP=90
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
LAUNCH=()
command -v ccache >/dev/null 2>&1 && LAUNCH=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
fail() { echo "gpu_check: $1" >&2; report "$OUT"; exit 1; }

# the mpi-labelled CUDA tests (NCCL across ranks) need one device per rank: two at least
NGPU=$(nvidia-smi -L | grep -c '^GPU')
EXCLUDE=()
((NGPU >= 2)) || EXCLUDE=(-LE mpi)
if ((NO_BUILD)); then
  [[ -f "$BUILD/CTestTestfile.cmake" ]] || fail "--no-build: $BUILD has no CTestTestfile.cmake (build it, or unpack a bundle there)"
  echo "== using the prebuilt $BUILD"
else
  echo "== configure $BUILD (sm_$CAP)"
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES="$CAP" \
    "${LAUNCH[@]}" >"$OUT/configure.log" 2>&1 || fail "configure failed (see $OUT/configure.log)"
  # the targets of the cuda-labelled tests (a test 'x' or 'x.case' is built by target 'x')
  mapfile -t TESTS < <(cd "$BUILD" && ctest -N -L "cuda|gpu_check" "${EXCLUDE[@]}" | sed -n 's/^ *Test *#[0-9]*: *\([^ .]*\).*/\1/p' | sort -u)
  TARGETS=("${TESTS[@]}" bench_kernels_cuda bench_engine_cuda 00_grpo_reverse_cuda)
  echo "== build ${TARGETS[*]}"
  cmake --build "$BUILD" -j"$JOBS" --target "${TARGETS[@]}" >"$OUT/build.log" 2>&1 || fail "build failed (see $OUT/build.log)"
fi

echo "== ctest -L 'cuda|gpu_check' ${EXCLUDE[*]}"
(cd "$BUILD" && ctest -L "cuda|gpu_check" "${EXCLUDE[@]}" --output-on-failure --timeout "$TEST_TIMEOUT") >"$OUT/ctest.log" 2>&1
tail -n 3 "$OUT/ctest.log"
echo "== benchmarks"
timeout 180 "$BUILD/benchmarks/kernels/bench_kernels_cuda" --benchmark_format=csv --benchmark_min_time=0.2 \
  --benchmark_filter='rows:1048576/group:8/len:256' >"$OUT/bench_kernels.csv" 2>"$OUT/bench_kernels.err"
# one run per set of counters: Google Benchmark's CSV writer needs the same counters in every row
# (decode counts tokens/s, the forward and sgemm FLOP/s, the static and the paged GRPO-shaped
# rollouts their own); the table reads each run's rows under their own header. BM_GenerateGroups
# runs a fixed 3 iterations (the minimum time does not apply)
: >"$OUT/bench_engine.csv"
for f in 'BM_Decode' 'BM_Forward|BM_Sgemm' 'BM_GenerateGroups/engine:static' 'BM_GenerateGroups/engine:paged'; do
  timeout 180 "$BUILD/benchmarks/engine_cuda/bench_engine_cuda" --benchmark_format=csv --benchmark_min_time=0.5 \
    --benchmark_filter="$f" >>"$OUT/bench_engine.csv" 2>>"$OUT/bench_engine.err"
done
timeout 180 "$BUILD/benchmarks/engine_cuda/bench_engine_cuda" --benchmark_format=csv --benchmark_filter='BM_BatchedBench' \
  >"$OUT/bench_batched.csv" 2>"$OUT/bench_batched.err"

echo "== demo: 00_grpo_reverse_cuda for $STEPS steps"
timeout 300 "$BUILD/examples/00_grpo_reverse_cuda" trainer.total_training_steps="$STEPS" trainer.default_local_dir="$OUT/demo" \
  >"$OUT/demo.log" 2>&1 || touch "$OUT/demo.failed"
echo "== demo: 00_grpo_reverse_cuda actor_rollout_ref.model.arch=qwen2 for $STEPS steps"
timeout 300 "$BUILD/examples/00_grpo_reverse_cuda" actor_rollout_ref.model.arch=qwen2 trainer.total_training_steps="$STEPS" \
  trainer.default_local_dir="$OUT/demo_qwen2" >"$OUT/demo_qwen2.log" 2>&1 || touch "$OUT/demo_qwen2.failed"

if ((DIAGNOSE)) && command -v compute-sanitizer >/dev/null 2>&1; then
  # the first three failed tests: each's command line from ctest's JSON, rerun under memcheck
  mapfile -t FAILED < <(sed -nE 's/^[[:space:]]*[0-9]+ - ([^ ]+) \(.*/\1/p' "$OUT/ctest.log" | head -n 3)
  for t in "${FAILED[@]}"; do
    cmd=$(cd "$BUILD" && ctest --show-only=json-v1 -R "^${t//./\\.}\$" | python3 -c 'import json,sys,shlex; d=json.load(sys.stdin); print(shlex.join(d["tests"][0]["command"]))' 2>/dev/null)
    [[ -n "$cmd" ]] || continue
    echo "== compute-sanitizer: $t"
    (cd "$BUILD" && eval timeout 90 compute-sanitizer --tool memcheck --print-limit 20 "$cmd") >"$OUT/sanitizer_$t.log" 2>&1
    tail -n 5 "$OUT/sanitizer_$t.log"
  done
fi

echo
report "$OUT"
