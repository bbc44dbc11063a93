#!/usr/bin/env bash
# tools/cpu_targets.sh: the CPU figures in one run, as benchmarks/RESULTS.md records them
# (what each measures: docs/model.md, "Benchmarks"). Run it on an idle machine after building (make build, or
# cmake --build build --target bench_engine bench_trainer bench_kernels); it takes about 8 minutes
# on two cores. Every benchmark's output goes to OUT (default build/cpu_targets/); the summary
# table is printed at the end. PyTorch (Debian's python3-torch, python3-numpy: make compare-verl
# installs them) is needed for the side-by-side rows; without it those rows read n/a.
#
# usage: tools/cpu_targets.sh [--build DIR] [--out DIR]
#        tools/cpu_targets.sh --parse DIR   # only print the table from DIR's saved outputs
set -uo pipefail
BUILD=build
OUT=""
PARSE=""
while (($#)); do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --parse) PARSE="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cpu_targets: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# median_ms FILE NAME_REGEX: the real-time median (ms) of the first aggregate row whose name matches
median_ms() {
  awk -v pat="$2" '$1 ~ pat && $1 ~ /_median$/ { v = $2; u = $3; if (u == "us") v /= 1000; if (u == "s") v *= 1000; print v; exit }' "$1" 2>/dev/null
}
# step_ratio FILE: the step row's rlflow / PyTorch ratio of a tools/torch_grpo_step.py table
step_ratio() {
  awk -F'|' '$2 ~ /^ step / { gsub(/ /, "", $5); print $5 }' "$1" 2>/dev/null
}
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.1f%%", 100 * a / b }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'; }

report() {
  local d="$1"
  local f1 s1 b1 sb1 f2 s2 b2 sb2 k1 k2
  f1=$(median_ms "$d/engine_1.txt" '^BM_ModelForward'); s1=$(median_ms "$d/engine_1.txt" '^BM_SgemmSameShapes')
  b1=$(median_ms "$d/engine_1.txt" '^BM_ModelBackward'); sb1=$(median_ms "$d/engine_1.txt" '^BM_SgemmBackwardShapes')
  f2=$(median_ms "$d/engine_2_model.txt" '^BM_ModelForward'); s2=$(median_ms "$d/engine_2_sgemm.txt" '^BM_SgemmSameShapes')
  b2=$(median_ms "$d/engine_2_model.txt" '^BM_ModelBackward'); sb2=$(median_ms "$d/engine_2_sgemm.txt" '^BM_SgemmBackwardShapes')
  k1=$(median_ms "$d/engine_1.txt" '^BM_RolloutDecode/kv_cache'); k2=$(median_ms "$d/engine_2_model.txt" '^BM_RolloutDecode/kv_cache')
  local decode step1 step2 step2b uid65 uid1m
  decode=$(awk '$1 == "BM_RolloutDecode/kv_cache" { print $4 }' "$d/torch_side_by_side.txt" 2>/dev/null)
  step1=$(step_ratio "$d/grpo_step_1.txt")
  step2=$(step_ratio "$d/grpo_step_2.txt")
  step2b=$(step_ratio "$d/grpo_step_2_blas1.txt")
  uid65=$(sed -n 's/^rows 65536: verl.*speed-up \([0-9.]*x\) (with.*/\1/p' "$d/compare_verl.txt" 2>/dev/null)
  uid1m=$(sed -n 's/^rows 1048576: verl.*speed-up \([0-9.]*x\) (with.*/\1/p' "$d/compare_verl.txt" 2>/dev/null)
  printf '%-62s %s\n' "target" "figure"
  printf '%-62s %s\n' "--------------------------------------------------------------" "--------------------"
  printf '%-62s %s\n' "BM_ModelForward / BM_SgemmSameShapes, 1 thread (>= 75%)" "$(pct "$s1" "$f1")"
  printf '%-62s %s\n' "BM_ModelForward / BM_SgemmSameShapes, 2 threads (>= 60%)" "$(pct "$s2" "$f2")"
  printf '%-62s %s\n' "BM_ModelBackward / BM_SgemmBackwardShapes, 1 thread (>= 60%)" "$(pct "$sb1" "$b1")"
  printf '%-62s %s\n' "BM_ModelBackward / BM_SgemmBackwardShapes, 2 threads (>= 60%)" "$(pct "$sb2" "$b2")"
  printf '%-62s %s\n' "KV-cache decode, PyTorch / rlflow (>= 3)" "${decode:-n/a}"
  printf '%-62s %s\n' "GRPO step rlflow / PyTorch, 1 thread" "${step1:-n/a}"
  printf '%-62s %s\n' "GRPO step rlflow / PyTorch, 2 threads (<= 0.5)" "${step2:-n/a}"
  printf '%-62s %s\n' "  the same, PyTorch with OPENBLAS_NUM_THREADS=1" "${step2b:-n/a}"
  printf '%-62s %s\n' "two threads / one: forward, backward, decode speed-up" "$(ratio "$f1" "$f2") $(ratio "$b1" "$b2") $(ratio "$k1" "$k2")"
  printf '%-62s %s\n' "uid strings -> GRPO advantage vs verl, 65,536 rows (>= 10x)" "${uid65:-n/a}"
  printf '%-62s %s\n' "uid strings -> GRPO advantage vs verl, 1,048,576 rows (>= 10x)" "${uid1m:-n/a}"
  printf '%-62s %s\n' "load average at the start / end" "$(head -n1 "$d/load.txt" 2>/dev/null) / $(tail -n1 "$d/load.txt" 2>/dev/null)"
}

if [[ -n "$PARSE" ]]; then
  report "$PARSE"
  exit 0
fi

cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-$BUILD/cpu_targets}
E=$BUILD/benchmarks/engine/bench_engine
T=$BUILD/benchmarks/trainer/bench_trainer
K=$BUILD/benchmarks/kernels/bench_kernels
for b in "$E" "$T" "$K"; do
  [[ -x "$b" ]] || { echo "cpu_targets: $b is missing; build it first (cmake --build $BUILD --target bench_engine bench_trainer bench_kernels)" >&2; exit 2; }
done
mkdir -p "$OUT"
PY=/usr/bin/python3
AGG=(--benchmark_repetitions=5 --benchmark_report_aggregates_only=true)
cut -d' ' -f1-3 /proc/loadavg >"$OUT/load.txt"
echo "== engine, one thread"
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$E" "${AGG[@]}" \
  --benchmark_filter='BM_ModelForward|BM_SgemmSameShapes|BM_ModelBackward|BM_SgemmBackwardShapes|BM_RolloutDecode/kv_cache' >"$OUT/engine_1.txt" 2>&1
echo "== engine, two threads (the model: OpenMP team of 2, OpenBLAS 1; sgemm: OpenBLAS 2)"
OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1 "$E" "${AGG[@]}" \
  --benchmark_filter='BM_ModelForward|BM_ModelBackward|BM_RolloutDecode/kv_cache' >"$OUT/engine_2_model.txt" 2>&1
OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 "$E" "${AGG[@]}" \
  --benchmark_filter='BM_SgemmSameShapes|BM_SgemmBackwardShapes' >"$OUT/engine_2_sgemm.txt" 2>&1
if "$PY" -c 'import torch, numpy' 2>/dev/null; then
  echo "== PyTorch side by side (model level, one thread)"
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$PY" tools/torch_side_by_side.py --bench "$E" >"$OUT/torch_side_by_side.txt" 2>&1
  echo "== verl's vectorized GRPO from uid strings (make compare-verl)"
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$PY" tools/verl_grpo_vectorized_bench.py --bench "$K" >"$OUT/compare_verl.txt" 2>&1
  for n in 1 2; do
    echo "== GRPO step side by side, $n thread(s)"
    OMP_NUM_THREADS=$n "$PY" tools/torch_grpo_step.py --bench "$T" --reps 3 >"$OUT/grpo_step_$n.txt" 2>&1
  done
  echo "== GRPO step side by side, 2 threads, PyTorch with one BLAS thread"
  OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1 "$PY" tools/torch_grpo_step.py --bench "$T" --reps 3 >"$OUT/grpo_step_2_blas1.txt" 2>&1
else
  echo "== no PyTorch at $PY (make compare-verl installs it): the side-by-side rows are skipped"
fi
cut -d' ' -f1-3 /proc/loadavg >>"$OUT/load.txt"
echo
report "$OUT"
