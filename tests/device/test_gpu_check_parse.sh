#!/usr/bin/env bash
# tests/device/test_gpu_check_parse.sh: tools/gpu_check.sh --parse on canned outputs (the formats
# ctest, Google Benchmark's CSV and the trainer's metrics.jsonl write): the table's numbers and the
# exit status (0 only when every test passed and every stage left its output).
set -u
script="$1"
source "$(dirname "$0")/../parse_expect.sh"  # $tmp, $bad, expect DESCRIPTION OUTPUT REGEX

good="$tmp/good"
mkdir -p "$good/demo" "$good/demo_qwen2"
echo "NVIDIA H200, 143771 MiB, 580.95" >"$good/device.txt"
cat >"$good/ctest.log" <<'LOG'
    Start 1: test_foundation_cuda
1/4 Test #1: test_foundation_cuda .............   Passed    0.51 sec
100% tests passed, 0 tests failed out of 4

Label Time Summary:
cuda    =   9.12 sec*proc (4 tests)
LOG
cat >"$good/bench_kernels.csv" <<'CSV'
name,iterations,real_time,cpu_time,time_unit,bytes_per_second,items_per_second,label,error_occurred,error_message,"GB/s"
"BM_GRPOAdvantage/rows:1048576/group:8/len:256/manual_time",100,1.5,1.6,ms,,,,,,3.6005e+12
"BM_Memcpy/rows:1048576/group:8/len:256/manual_time",100,1.2,1.2,ms,,,,,,4e+12
CSV
# four runs appended to one file, each under its own header (the CSV writer aborts when rows
# carry different counters, so the script runs the decode, the FLOP/s and the two GRPO-shaped
# rollout benchmarks apart; user counters come after error_message, sorted by name)
cat >"$good/bench_engine.csv" <<'CSV'
name,iterations,real_time,cpu_time,time_unit,bytes_per_second,items_per_second,label,error_occurred,error_message,"tokens/s"
"BM_Decode/kv:1/real_time",10,50,50,ms,,,,,,163840
"BM_Decode/kv:0/real_time",2,400,400,ms,,,,,,20480
name,iterations,real_time,cpu_time,time_unit,bytes_per_second,items_per_second,label,error_occurred,error_message,"FLOP/s"
"BM_Forward/real_time",100,2,2,ms,,,,,,2.5e+13
"BM_Sgemm/real_time",100,1,1,ms,,,,,,4e+13
name,iterations,real_time,cpu_time,time_unit,bytes_per_second,items_per_second,label,error_occurred,error_message,"kv_peak_bytes","tokens","tokens/s"
"BM_GenerateGroups/engine:static/iterations:3/real_time",3,400,120,ms,,,"G=64 n=8 P=256 R<=512; one batch of G n rows",,,2.01327e+08,52705,131763
name,iterations,real_time,cpu_time,time_unit,bytes_per_second,items_per_second,label,error_occurred,error_message,"kv_peak_bytes","kv_pool_bytes","preemptions","prompt_tokens","tokens","tokens/s"
"BM_GenerateGroups/engine:paged/iterations:3/real_time",3,100,90,ms,,,"G=64 n=8 P=256 R<=512; block 16; max_num_seqs 256; max_num_batched_tokens 8192; pool 40% of static",,,1.47456e+07,8.05306e+07,0,16384,52705,527050
CSV
# llama.cpp's batched-bench, both engines in one run (the same counters)
cat >"$good/bench_batched.csv" <<'CSV'
name,iterations,real_time,cpu_time,time_unit,bytes_per_second,items_per_second,label,error_occurred,error_message,"S_PP","S_TG"
"BM_BatchedBench/engine:static/PP:128/TG:128/B:1/iterations:1/real_time",1,24.3,12.1,ms,,,,,,68892.9,6160.63
"BM_BatchedBench/engine:static/PP:128/TG:128/B:32/iterations:1/real_time",1,847,433,ms,,,,,,43646.5,1269.4
"BM_BatchedBench/engine:paged/PP:128/TG:128/B:1/iterations:1/real_time",1,16.5,16.5,ms,,,,,,38318.1,12933.3
"BM_BatchedBench/engine:paged/PP:128/TG:128/B:32/iterations:1/real_time",1,127,123,ms,,,,,,37152.6,141412
CSV
for s in 1 2 3; do
  echo "{\"step\": $s, \"critic/score/mean\": 0.$((s * 2)), \"timing_s/step\": 0.$((s + 1))}" >>"$good/demo/metrics.jsonl"
  echo "{\"step\": $s, \"critic/score/mean\": 0.$((s + 1)), \"timing_s/step\": 0.5}" >>"$good/demo_qwen2/metrics.jsonl"
done
out=$("$script" --parse "$good"); rc=$?
[[ $rc == 0 ]] || { echo "FAIL: a passing run exits $rc"; bad=1; }
expect "device" "$out" "device \(nvidia-smi\) +NVIDIA H200"
expect "tests" "$out" "passed / failed \(of total\) +4 / 0 \(of 4\)"
expect "bandwidth" "$out" "3.6e\+12 B/s / 4e\+12 B/s = 90.0% "
expect "decode" "$out" "1.64e\+05 tok/s / 2.05e\+04 tok/s \(x8.0\)"
expect "flops" "$out" "= 62.5% \(target >= 50%\)"
expect "groups tokens/s" "$out" "generate groups tokens/s, paged / static +5.27e\+05 tok/s / 1.32e\+05 tok/s = x4.0 \(target >= 2x\)"
expect "groups peak KV" "$out" "peak KV bytes, paged / static +1.47e\+07 B / 2.01e\+08 B = 7.3% \(target <= 40%\)"
expect "batched B 1" "$out" "batched-bench PP:128 TG:128 B:1 S_PP / S_TG +static 6.89e\+04 / 6.16e\+03, paged 3.83e\+04 / 1.29e\+04 tok/s"
expect "batched B 32" "$out" "batched-bench PP:128 TG:128 B:32 S_PP / S_TG +static 4.36e\+04 / 1.27e\+03, paged 3.72e\+04 / 1.41e\+05 tok/s"
expect "demo score" "$out" "first -> last step +0.2 -> 0.6 \(3 steps\)"
expect "seconds per step" "$out" "per step \(mean\) +0.300"
expect "qwen2 demo" "$out" "arch=qwen2: score first -> last step +0.2 -> 0.4 \(3 steps\)"
expect "overall" "$out" "overall +PASS"

# CMake 4's ctest leaves the failed count out when none failed (seen on the first GPU run)
short="$tmp/short"
cp -r "$good" "$short"
sed -i 's/100% tests passed, 0 tests failed out of 4/100% tests passed out of 4/' "$short/ctest.log"
out=$("$script" --parse "$short"); rc=$?
[[ $rc == 0 ]] || { echo "FAIL: a passing run in CMake 4's words exits $rc"; bad=1; }
expect "short summary" "$out" "passed / failed \(of total\) +4 / 0 \(of 4\)"

# one failed test: the same table, exit 1
failing="$tmp/failing"
cp -r "$good" "$failing"
sed -i 's/100% tests passed, 0 tests failed out of 4/75% tests passed, 1 tests failed out of 4/' "$failing/ctest.log"
out=$("$script" --parse "$failing"); rc=$?
[[ $rc != 0 ]] || { echo "FAIL: a failed test exits 0"; bad=1; }
expect "failed count" "$out" "3 / 1 \(of 4\)"
expect "overall fail" "$out" "overall +FAIL"

# a stage that left nothing (the engine benchmark did not run, the demo crashed): exit 1, n/a
missing="$tmp/missing"
cp -r "$good" "$missing"
rm "$missing/bench_engine.csv"
rm -r "$missing/demo_qwen2"
touch "$missing/demo.failed"
out=$("$script" --parse "$missing"); rc=$?
[[ $rc != 0 ]] || { echo "FAIL: missing outputs exit 0"; bad=1; }
expect "n/a" "$out" "forward FLOP/s / cuBLAS sgemm FLOP/s +n/a / n/a = n/a"
expect "groups n/a" "$out" "generate groups tokens/s, paged / static +n/a / n/a = n/a \(target >= 2x\)"
expect "groups peak KV n/a" "$out" "peak KV bytes, paged / static +n/a / n/a = n/a \(target <= 40%\)"
expect "qwen2 n/a" "$out" "arch=qwen2: score first -> last step +n/a -> n/a \(0 steps\)"

# the GRPO-shaped rollout rows missing (a binary without them, or the runs timed out) while the
# rest of the engine benchmarks ran: exit 1, n/a on those two lines only
nogroups="$tmp/nogroups"
cp -r "$good" "$nogroups"
awk '/kv_peak_bytes/ { skip = 1 } /^name,/ && !/kv_peak_bytes/ { skip = 0 } !skip' "$good/bench_engine.csv" >"$nogroups/bench_engine.csv"
out=$("$script" --parse "$nogroups"); rc=$?
[[ $rc != 0 ]] || { echo "FAIL: missing BM_GenerateGroups rows exit 0"; bad=1; }
expect "no groups: decode kept" "$out" "1.64e\+05 tok/s / 2.05e\+04 tok/s \(x8.0\)"
expect "no groups: tokens/s n/a" "$out" "generate groups tokens/s, paged / static +n/a / n/a = n/a"
expect "no groups: peak KV n/a" "$out" "peak KV bytes, paged / static +n/a / n/a = n/a"
expect "no groups: overall" "$out" "overall +FAIL"

# the paged run reported an error (Google Benchmark's error row: no counters), the static one ran
pagederr="$tmp/pagederr"
cp -r "$good" "$pagederr"
awk '/engine:paged/ { skip = 1 } !skip' "$good/bench_engine.csv" >"$pagederr/bench_engine.csv"
cat >>"$pagederr/bench_engine.csv" <<'CSV'
name,iterations,real_time,cpu_time,time_unit,bytes_per_second,items_per_second,label,error_occurred,error_message
"BM_GenerateGroups/engine:paged/iterations:3/real_time",,,,,,,,true,"no CUDA device"
CSV
out=$("$script" --parse "$pagederr"); rc=$?
[[ $rc != 0 ]] || { echo "FAIL: a failed paged run exits 0"; bad=1; }
expect "paged error: tokens/s" "$out" "generate groups tokens/s, paged / static +n/a / 1.32e\+05 tok/s = n/a"
expect "paged error: peak KV" "$out" "peak KV bytes, paged / static +n/a / 2.01e\+08 B = n/a"
expect "paged error: overall" "$out" "overall +FAIL"

# the batched-bench run missing, or its paged rows (an error row has no counters): exit 1, n/a
nobatched="$tmp/nobatched"
cp -r "$good" "$nobatched"
rm "$nobatched/bench_batched.csv"
out=$("$script" --parse "$nobatched"); rc=$?
[[ $rc != 0 ]] || { echo "FAIL: a missing batched-bench run exits 0"; bad=1; }
expect "no batched: n/a" "$out" "batched-bench S_PP / S_TG +n/a"
expect "no batched: groups kept" "$out" "generate groups tokens/s, paged / static +5.27e\+05 tok/s"
grep -v 'engine:paged' "$good/bench_batched.csv" >"$nobatched/bench_batched.csv"
echo '"BM_BatchedBench/engine:paged/PP:128/TG:128/B:1/iterations:1/real_time",,,,,,,,true,"no CUDA device"' >>"$nobatched/bench_batched.csv"
out=$("$script" --parse "$nobatched"); rc=$?
[[ $rc != 0 ]] || { echo "FAIL: batched-bench without paged rows exits 0"; bad=1; }
expect "paged batched n/a" "$out" "batched-bench PP:128 TG:128 B:1 S_PP / S_TG +static 6.89e\+04 / 6.16e\+03, paged n/a / n/a tok/s"

# an empty directory: nothing passes
mkdir -p "$tmp/empty"
out=$("$script" --parse "$tmp/empty"); rc=$?
[[ $rc != 0 ]] || { echo "FAIL: an empty directory exits 0"; bad=1; }
expect "no device" "$out" "no nvidia-smi output"

[[ $bad == 0 ]] && echo "gpu_check --parse: all checks passed"
exit $bad
