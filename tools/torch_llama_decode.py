#!/usr/bin/env python3
"""KV-cache decode of the Llama family next to PyTorch eager, in one run: BM_RolloutDecode/arch:qwen2's
model (Qwen2.5-0.5B's layer shapes, two layers, vocabulary 64) and batch (B = 8 prompts of 32
tokens, 32 new tokens), float32, the same threads.

PyTorch side: tests/model/llama_reference.py's KV-cache greedy decode (eager, written from
transformers' modeling code) on a random folder of that shape, loaded in float32; medians of --reps.
rlflow side: bench_llama's BM_RolloutDecode/arch:qwen2 (KV cache, sampling at temperature 1) and
its /stable:off twin (BLAS products only) run as a subprocess right after. Prints tokens/s of each
and the ratios.

  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tools/torch_llama_decode.py \\
      --bench build/benchmarks/engine/bench_llama
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "model"))
import llama_reference as ref  # noqa: E402

B, P, R = 8, 32, 32


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="build/benchmarks/engine/bench_llama")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    with tempfile.TemporaryDirectory() as d:
        ref.main(["--make-random", d, "--arch", "qwen2", "--seed", "1", "--vocab", "64", "--hidden", "896",
                  "--intermediate", "4864", "--layers", "2", "--heads", "14", "--kv-heads", "2", "--init-scale", "0.02"])
        cfg, params = ref.load_model(d, dtype=torch.float32)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 64, (B, P), generator=g)
    mask = torch.ones(B, P, dtype=torch.long)
    times = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        ref.greedy(cfg, params, ids, mask, R)
        times.append(time.perf_counter() - t0)
    torch_tps = B * R / statistics.median(times)
    out = subprocess.run([a.bench, "--benchmark_filter=^BM_RolloutDecode/arch:qwen2", f"--benchmark_repetitions={a.reps}",
                          "--benchmark_report_aggregates_only=true", "--benchmark_format=json"],
                         capture_output=True, text=True, check=True)
    med = {x["run_name"].removesuffix("/real_time"): x["tokens/s"]
           for x in json.loads(out.stdout)["benchmarks"] if x.get("aggregate_name") == "median"}
    rlflow_tps = med["BM_RolloutDecode/arch:qwen2"]
    print(f"threads {torch.get_num_threads()}: pytorch {torch_tps:.1f} tokens/s, rlflow {rlflow_tps:.1f} tokens/s, "
          f"rlflow/pytorch {rlflow_tps / torch_tps:.2f}")
    blas_tps = med.get("BM_RolloutDecode/arch:qwen2/stable:off")
    if blas_tps:
        print(f"rlflow with BLAS products only (stable:off) {blas_tps:.1f} tokens/s, rlflow/pytorch {blas_tps / torch_tps:.2f}")


if __name__ == "__main__":
    main()
