#!/usr/bin/env python3
"""Times verl's vectorized GRPO advantage from verl's interface against rlflow's, in one run.

verl side: the algorithm of verl.trainer.ppo.core_algos.compute_grpo_vectorized_outcome_advantage
with verl.utils.groupwise.as_torch_index / group_mean_std, restated here (verl itself is not
installed): scores = rewards.sum(-1); np.unique(object array of uid strings, return_inverse=True);
count/sum/sum-of-squares by index_add_ in float32; mean, std = sqrt(clamp(var, eps)), singletons
(0, 1); scalars = (scores - mean[g]) / (std[g] + eps); advantages = scalars[:, None] * mask.
Inputs are what verl's batch holds: a numpy object array of uuid4 strings (G rows each, shuffled),
token_level_rewards float32 (B, L), response_mask int32 (B, L).

rlflow side: bench_kernels' BM_GRPOAdvantageFromUids/.../impl:0 (the same shapes and input kinds;
advantages written once, as verl returns one tensor for both names) and impl:2 (a separate returns
buffer written too), run as a subprocess right after, so the figures come from the same machine
state.

Needs python3-torch (Debian 1.13) and numpy; run with the system python:
  OMP_NUM_THREADS=1 /usr/bin/python3 tools/verl_grpo_vectorized_bench.py --bench build/benchmarks/kernels/bench_kernels
"""
import argparse
import json
import os
import statistics
import subprocess
import time
import uuid

import numpy as np
import torch


def as_torch_index(index):
    arr = np.asarray(index).reshape(-1)
    if arr.dtype != object and np.issubdtype(arr.dtype, np.integer):
        return torch.from_numpy(arr.astype(np.int64, copy=False))
    if arr.dtype != object:
        arr = arr.astype(object)
    _, inv = np.unique(arr, return_inverse=True)
    return torch.from_numpy(inv.astype(np.int64, copy=False))


@torch.no_grad()
def group_mean_std(scores, gidx, eps=1e-6):
    scores = scores.reshape(-1).to(dtype=torch.float32)
    gidx = gidx.reshape(-1).to(dtype=torch.long)
    G = int(torch.max(gidx).item()) + 1
    ones = torch.ones_like(scores)
    count = torch.zeros(G, dtype=torch.float32).index_add_(0, gidx, ones)
    s1 = torch.zeros(G, dtype=torch.float32).index_add_(0, gidx, scores)
    s2 = torch.zeros(G, dtype=torch.float32).index_add_(0, gidx, scores * scores)
    mean = s1 / count.clamp_min(1.0)
    var = (s2 - (s1 * s1) / count.clamp_min(1.0)) / (count - 1.0).clamp_min(1.0)
    std = torch.sqrt(torch.clamp(var, min=eps))
    single = count <= 1.0
    if torch.any(single):
        mean = mean.clone()
        std = std.clone()
        mean[single] = 0.0
        std[single] = 1.0
    return mean, std, count


def verl_grpo_vectorized(token_level_rewards, response_mask, index, epsilon=1e-6, norm_adv_by_std_in_grpo=True):
    with torch.no_grad():
        scores = token_level_rewards.sum(dim=-1)
        g = as_torch_index(index)
        mean_g, std_g, _ = group_mean_std(scores, g, eps=epsilon)
        if norm_adv_by_std_in_grpo:
            scalars = (scores - mean_g[g]) / (std_g[g] + epsilon)
        else:
            scalars = scores - mean_g[g]
        advantages = scalars.unsqueeze(-1) * response_mask
        return advantages, advantages


def inputs(B, G, L, seed=7):
    rng = np.random.default_rng(seed)
    names = [str(uuid.UUID(int=int(rng.integers(0, 2**63)) << 64 | int(rng.integers(0, 2**63)), version=4))
             for _ in range((B + G - 1) // G)]
    prompt = rng.permutation(np.arange(B) // G)
    uid = np.array([names[p] for p in prompt], dtype=object)
    lens = rng.integers(1, L + 1, size=B)
    mask = (np.arange(L)[None, :] < lens[:, None]).astype(np.int32)
    rewards = np.zeros((B, L), dtype=np.float32)
    rewards[np.arange(B), lens - 1] = rng.integers(0, 4, size=B) * 0.5
    return torch.from_numpy(rewards), torch.from_numpy(mask), uid


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="build/benchmarks/kernels/bench_kernels")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    print(f"torch {torch.__version__}, numpy {np.__version__}, torch threads {torch.get_num_threads()}, load {os.getloadavg()}")
    rows = []
    for B in (1 << 16, 1 << 20):
        r, m, uid = inputs(B, 8, 64)
        verl_grpo_vectorized(r, m, uid)  # warm-up
        ts, cs = [], []
        for _ in range(a.reps):
            t0, c0 = time.perf_counter(), time.process_time()
            verl_grpo_vectorized(r, m, uid)
            ts.append(time.perf_counter() - t0)
            cs.append(time.process_time() - c0)
        verl_ms = statistics.median(ts) * 1e3
        verl_cpu_ms = statistics.median(cs) * 1e3  # process CPU time: not inflated by waiting for a core
        out = subprocess.run([a.bench, f"--benchmark_filter=BM_GRPOAdvantageFromUids/rows:{B}/group:8/len:64/impl:[02](/|$)",
                              f"--benchmark_repetitions={a.reps}", "--benchmark_report_aggregates_only=true",
                              "--benchmark_format=json"], capture_output=True, text=True, check=True)
        meds = [b for b in json.loads(out.stdout)["benchmarks"] if b.get("aggregate_name") == "median"]
        med = {b["name"].split("impl:")[1][0]: b["real_time"] for b in meds}  # the benchmark reports milliseconds
        cpu = {b["name"].split("impl:")[1][0]: b["cpu_time"] for b in meds}
        ours_ms, both_ms = med["0"], med["2"]
        rows.append((B, verl_ms, ours_ms))
        # impl:0 writes advantages (verl's function returns that one tensor as advantages and
        # returns); impl:2 also writes a separate returns buffer
        print(f"rows {B}: verl vectorized (python) {verl_ms:.1f} ms median, rlflow {ours_ms:.1f} ms median, "
              f"speed-up {verl_ms / ours_ms:.1f}x (with a separate returns buffer {both_ms:.1f} ms, {verl_ms / both_ms:.1f}x), "
              f"load {os.getloadavg()[0]:.2f}")
        print(f"rows {B}: CPU time (one thread each; on a loaded machine the steadier figure): verl {verl_cpu_ms:.1f} ms, "
              f"rlflow {cpu['0']:.1f} ms, speed-up {verl_cpu_ms / cpu['0']:.1f}x")


if __name__ == "__main__":
    main()
