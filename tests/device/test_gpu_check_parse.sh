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
# two runs appended to one file, each under its own header (the CSV writer aborts when rows
# carry different counters, so the script runs the decode and the FLOP/s benchmarks apart)
cat >"$good/bench_engine.csv" <<'CSV'
name,iterations,real_time,cpu_time,time_unit,bytes_per_second,items_per_second,label,error_occurred,error_message,"tokens/s"
"BM_Decode/kv:1/real_time",10,50,50,ms,,,,,,163840
"BM_Decode/kv:0/real_time",2,400,400,ms,,,,,,20480
name,iterations,real_time,cpu_time,time_unit,bytes_per_second,items_per_second,label,error_occurred,error_message,"FLOP/s"
"BM_Forward/real_time",100,2,2,ms,,,,,,2.5e+13
"BM_Sgemm/real_time",100,1,1,ms,,,,,,4e+13
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
expect "qwen2 n/a" "$out" "arch=qwen2: score first -> last step +n/a -> n/a \(0 steps\)"

# an empty directory: nothing passes
mkdir -p "$tmp/empty"
out=$("$script" --parse "$tmp/empty"); rc=$?
[[ $rc != 0 ]] || { echo "FAIL: an empty directory exits 0"; bad=1; }
expect "no device" "$out" "no nvidia-smi output"

[[ $bad == 0 ]] && echo "gpu_check --parse: all checks passed"
exit $bad
