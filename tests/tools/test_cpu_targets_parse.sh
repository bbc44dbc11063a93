#!/usr/bin/env bash
# tests/tools/test_cpu_targets_parse.sh: tools/cpu_targets.sh --parse on canned outputs (Google
# Benchmark's console aggregates, tools/torch_side_by_side.py, tools/torch_grpo_step.py and
# tools/verl_grpo_vectorized_bench.py as they print): each row of the table from the right file
# and column, units converted, and n/a where an output is missing.
set -u
script="$1"
source "$(dirname "$0")/../parse_expect.sh"  # $tmp, $bad, expect DESCRIPTION OUTPUT REGEX
d="$tmp/out"
mkdir -p "$d"
cat >"$d/engine_1.txt" <<'TXT'
Run on (2 X 2600 MHz CPU s)
Benchmark                                           Time             CPU   Iterations UserCounters...
BM_RolloutDecode/kv_cache/real_time_mean         34.5 ms         34.4 ms            5 tokens/s=119.156k/s
BM_RolloutDecode/kv_cache/real_time_median       34.4 ms         34.4 ms            5 tokens/s=119.156k/s
BM_ModelForward/real_time_mean                   99.0 ms         99.0 ms            5 FLOP/s=87.9123G/s
BM_ModelForward/real_time_median                 80.0 ms         73.3 ms            5 FLOP/s=87.9123G/s
BM_SgemmSameShapes/real_time_median              60000 us         43.7 ms            5 FLOP/s=147.269G/s
BM_ModelBackward/real_time_median                0.15 s          144 ms            5 FLOP/s=90.1191G/s
BM_SgemmBackwardShapes/real_time_median          90.0 ms         95.1 ms            5 FLOP/s=136.154G/s
TXT
cat >"$d/engine_2_model.txt" <<'TXT'
BM_RolloutDecode/kv_cache/real_time_median       17.2 ms         24.9 ms            5 tokens/s=164.128k/s
BM_ModelForward/real_time_median                 40.0 ms         33.7 ms            5 FLOP/s=190.683G/s
BM_ModelBackward/real_time_median                75.0 ms         67.0 ms            5 FLOP/s=192.997G/s
TXT
cat >"$d/engine_2_sgemm.txt" <<'TXT'
BM_SgemmSameShapes/real_time_median              30.0 ms         21.5 ms            5 FLOP/s=299.51G/s
BM_SgemmBackwardShapes/real_time_median          60.0 ms         49.5 ms            5 FLOP/s=260.373G/s
TXT
cat >"$d/torch_side_by_side.txt" <<'TXT'
torch 1.13.0a0, threads 1, load (1.07, 0.46, 0.22)
benchmark                     pytorch ms   rlflow ms (real/cpu)  pytorch/rlflow  load
BM_ModelForward                    76.81       71.02/71.02                 1.08  1.06
BM_ModelBackward                  151.00      139.29/139.27                1.08  1.06
BM_RolloutDecode/kv_cache         164.53       32.25/32.24                 5.10  1.05
TXT
for n in 1 2 2_blas1; do
  case $n in 1) r=0.74 ;; 2) r=0.26 ;; *) r=0.45 ;; esac
  cat >"$d/grpo_step_$n.txt" <<TXT
torch 1.13.0a0, threads 2 (rlflow: OMP_NUM_THREADS=2, OPENBLAS_NUM_THREADS=1, one worker); load average 1.0 / 1.7 / 1.8
| stage | PyTorch eager s | rlflow s | rlflow / PyTorch |
| --- | --- | --- | --- |
| gen | 2.316 | 0.384 | 0.17 |
| update_actor | 2.611 | 0.895 | 0.34 |
| step | 6.976 | 1.846 | $r |
TXT
done
cat >"$d/compare_verl.txt" <<'TXT'
torch 1.13.0a0, numpy 1.24.2, torch threads 1, load (1.05, 0.49, 0.24)
rows 65536: verl vectorized (python) 41.1 ms median, rlflow 4.0 ms median, speed-up 10.4x (with a separate returns buffer 4.8 ms, 8.6x), load 1.04
rows 65536: CPU time (one thread each; on a loaded machine the steadier figure): verl 41.1 ms, rlflow 4.0 ms, speed-up 10.4x
rows 1048576: verl vectorized (python) 1120.2 ms median, rlflow 131.1 ms median, speed-up 8.5x (with a separate returns buffer 147.5 ms, 7.6x), load 1.02
TXT
printf '0.02 0.22 0.14\n1.50 1.40 1.30\n' >"$d/load.txt"
out=$(bash "$script" --parse "$d")
echo "$out"
# medians only (the _mean rows come first and must be skipped); 60000 us = 60 ms, 0.15 s = 150 ms
expect "forward, one thread" "$out" 'SgemmSameShapes, 1 thread \(>= 75%\) +75\.0%$'
expect "forward, two threads" "$out" '2 threads \(>= 60%\) +75\.0%$'
expect "backward, one thread" "$out" 'BM_SgemmBackwardShapes, 1 thread \(>= 60%\) +60\.0%$'
expect "backward, two threads" "$out" 'BM_SgemmBackwardShapes, 2 threads \(>= 60%\) +80\.0%$'
expect "decode vs PyTorch" "$out" 'PyTorch / rlflow \(>= 3\) +5\.10$'
expect "GRPO step, one thread" "$out" 'GRPO step rlflow / PyTorch, 1 thread +0\.74$'
expect "GRPO step, two threads" "$out" 'GRPO step rlflow / PyTorch, 2 threads \(<= 0\.5\) +0\.26$'
expect "GRPO step, PyTorch one BLAS thread" "$out" 'OPENBLAS_NUM_THREADS=1 +0\.45$'
expect "two threads over one" "$out" 'decode speed-up +2\.00 2\.00 2\.00$'
expect "uid, 65,536 rows" "$out" '65,536 rows \(>= 10x\) +10\.4x$'
expect "uid, 1M rows" "$out" '1,048,576 rows \(>= 10x\) +8\.5x$'
expect "load" "$out" 'start / end +0\.02 0\.22 0\.14 / 1\.50 1\.40 1\.30$'
# missing outputs read n/a, never a number from another file
rm "$d/torch_side_by_side.txt" "$d/compare_verl.txt" "$d/engine_2_sgemm.txt"
out=$(bash "$script" --parse "$d")
expect "missing decode" "$out" 'PyTorch / rlflow \(>= 3\) +n/a$'
expect "missing uid" "$out" '1,048,576 rows \(>= 10x\) +n/a$'
expect "missing two-thread sgemm" "$out" '2 threads \(>= 60%\) +n/a$'
exit $bad
