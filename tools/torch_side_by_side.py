#!/usr/bin/env python3
"""The built-in GPT's CPU engines next to a plain PyTorch eager version of the same model, in one run.

PyTorch side (written here, eager, float32, torch.no_grad where rlflow has no graph):
  forward  : the trunk of BM_ModelForward (B=16, T=64, 4 layers, C=256, 4 heads, V=64): token +
             position embeddings, then per layer LN -> qkv -> causal softmax attention -> proj
             (+residual) -> LN -> fc -> GELU(tanh) -> fcproj (+residual). No final LN / head.
  backward : BM_ModelBackward's work: the loss sum_t log p(target_t) from the tied LM head on every
             position; the graph is built once and only loss.backward(retain_graph=True) is timed.
  decode   : BM_RolloutDecode/kv_cache (B=64 prompts of 8, 64 new tokens, 2 layers, C=64, 4 heads,
             V=64): prefill, then one token per step with a KV cache, multinomial sampling.
rlflow side: bench_engine's BM_ModelForward / BM_ModelBackward / BM_RolloutDecode/kv_cache, run
as a subprocess right after each PyTorch timing; medians of --reps repetitions each.

Run with the system python (python3-torch, Debian 1.13):
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tools/torch_side_by_side.py \
      --bench build/benchmarks/engine/bench_engine
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import time

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln1, self.ln2 = torch.nn.LayerNorm(C), torch.nn.LayerNorm(C)
        self.qkv, self.proj = torch.nn.Linear(C, 3 * C), torch.nn.Linear(C, C)
        self.fc, self.fcproj = torch.nn.Linear(C, 4 * C), torch.nn.Linear(4 * C, C)

    def attn(self, x, cache=None):
        B, T, C = x.shape
        hs = C // self.NH
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, hs).transpose(1, 2) for t in (q, k, v))
        if cache is not None:
            if cache[0] is not None:
                k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
            cache[0], cache[1] = k, v
        S = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        Tk = k.shape[2]
        causal = torch.ones(T, Tk, dtype=torch.bool).tril(Tk - T)
        S = S.masked_fill(~causal, float("-inf"))
        y = (S.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)

    def forward(self, x, cache=None):
        x = x + self.attn(self.ln1(x), cache)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(torch.nn.Module):
    def __init__(self, V, S, L, C, NH):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(V, C), torch.nn.Embedding(S, C)
        self.blocks = torch.nn.ModuleList([Block(C, NH) for _ in range(L)])
        self.lnf = torch.nn.LayerNorm(C)

    def trunk(self, ids, pos0=0, caches=None):
        T = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(pos0, pos0 + T))
        for i, b in enumerate(self.blocks):
            x = b(x, None if caches is None else caches[i])
        return x

    def logits(self, h):
        return self.lnf(h) @ self.wte.weight.t()


def median_ms(fn, reps, inner=1):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        ts.append((time.perf_counter() - t0) / inner)
    return statistics.median(ts) * 1e3


def rlflow_ms(bench, name, reps):
    out = subprocess.run([bench, f"--benchmark_filter=^{name}(/|$)", f"--benchmark_repetitions={reps}",
                          "--benchmark_report_aggregates_only=true", "--benchmark_format=json"],
                         capture_output=True, text=True, check=True)
    b = [x for x in json.loads(out.stdout)["benchmarks"] if x.get("aggregate_name") == "median"][0]
    return b["real_time"], b["cpu_time"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="build/benchmarks/engine/bench_engine")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    # Without this, Debian's torch 1.13 backward of this model took ~25 s instead of ~0.8 s: its
    # matrix products ran on denormal gradients (measured; rlflow's backward has no such slowdown).
    torch.set_flush_denormal(True)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, load {os.getloadavg()}")
    rows = []

    m = GPT(64, 64, 4, 256, 4)
    ids = torch.randint(0, 64, (16, 64))
    with torch.no_grad():
        t_fwd = median_ms(lambda: m.trunk(ids), a.reps, 3)
    rows.append(("BM_ModelForward", t_fwd))
    loss = m.logits(m.trunk(ids)).log_softmax(-1).gather(-1, ids.unsqueeze(-1)).sum()
    t_bwd = median_ms(lambda: loss.backward(retain_graph=True), a.reps, 3)
    rows.append(("BM_ModelBackward", t_bwd))

    d = GPT(64, 80, 2, 64, 4)
    prompts = torch.randint(3, 64, (64, 8))

    def decode():
        with torch.no_grad():
            caches = [[None, None] for _ in d.blocks]
            h = d.trunk(prompts, 0, caches)
            lg = d.logits(h[:, -1])
            for j in range(64):
                tok = torch.multinomial(lg.softmax(-1), 1)
                lp = lg.log_softmax(-1).gather(-1, tok)  # the rollout's log-prob, as rlflow returns it
                if j == 63:
                    break
                lg = d.logits(d.trunk(tok, 8 + j, caches)[:, -1])
            return lp

    rows.append(("BM_RolloutDecode/kv_cache", median_ms(decode, a.reps)))
    print(f"{'benchmark':28s} {'pytorch ms':>11s} {'rlflow ms (real/cpu)':>22s} {'pytorch/rlflow':>15s}  load")
    for name, tp in rows:
        rr, rc = rlflow_ms(a.bench, name, a.reps)
        print(f"{name:28s} {tp:11.2f} {rr:11.2f}/{rc:<10.2f} {tp / rr:15.2f}  {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
