#!/usr/bin/env python3
"""One GRPO step in plain PyTorch eager next to rlflow's (bench_trainer's BM_GRPOStepSideBySide), per stage.

The shapes of the comparison, the same on both sides:
  model   GPT-2 block stack, 4 layers, n_embd 128, 4 heads, tied LM head, vocabulary 30 (rlflow's
          CharTokenizer of 26 letters + '=': pad, bos, eos, then the characters), 48 positions
  batch   64 prompts x 8 samples = 512 rows, prompts of 16 tokens, up to 32 new tokens sampled at
          temperature 1 with a KV cache; a row stops at EOS (id 2) and leaves the decode batch, as
          rlflow's rollout drops finished rows
  stages  gen (prefill + decode + the sampled tokens' log-probs), old_log_prob (actor forward in
          micro-batches of 128 rows, log-probs + entropy, no grad), ref (the reference's forward,
          same), adv (GRPO outcome advantage over groups of 8), update_actor (4 mini-batches of 128
          rows: forward, PPO clip loss with dual clip (c = 3) + low_var_kl loss (coef 0.001) against
          the reference, token-mean, backward, grad-norm clip 1.0, AdamW)
  reward  a rule score computed with tensor ops here (rlflow decodes strings: about 0.2 ms), and
          update_weights (rlflow copies the actor into its rollout engine; PyTorch samples from the
          actor itself) are listed but not part of the comparison.

PyTorch runs eager, float32, torch.set_num_threads(OMP_NUM_THREADS), torch.set_flush_denormal(True)
(Debian's torch 1.13 otherwise runs its products on denormals, ~30x slower backward; see
tools/torch_side_by_side.py). rlflow's side is bench_trainer --benchmark_filter=SideBySide/workers:1,
run as a subprocess right after, with the same OMP_NUM_THREADS and OPENBLAS_NUM_THREADS=1 (rlflow
splits its products over its own OpenMP team; docs/model.md). Medians of --reps steps each.

  OMP_NUM_THREADS=2 /usr/bin/python3 tools/torch_grpo_step.py --bench build/benchmarks/trainer/bench_trainer
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_side_by_side import GPT as TrunkGPT  # noqa: E402  (the same model, one definition)

V, S, L, C, NH = 30, 48, 4, 128, 4
PROMPTS, N_SAMPLES, P, R = 64, 8, 16, 32
EOS = 2
MINI, MICRO = 128, 128


class GPT(TrunkGPT):
    """torch_side_by_side's GPT-2 block stack at these shapes, with GPT-2's initialisation (as
    rlflow's init_params, so EOS comes as often); forward returns the tied head's logits."""

    def __init__(self):
        super().__init__(V, S, L, C, NH)
        for m in self.modules():
            if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
                torch.nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.zeros_(m.bias)
        torch.nn.init.normal_(self.wpe.weight, 0.0, 0.01)
        for b in self.blocks:
            for w in (b.proj.weight, b.fcproj.weight):
                torch.nn.init.normal_(w, 0.0, 0.02 / math.sqrt(2 * L))

    def forward(self, ids, pos0=0, caches=None):
        return self.logits(self.trunk(ids, pos0, caches))


def generate(actor, prompts):
    """Prefill + decode with a KV cache; finished rows leave the batch. Returns responses, mask, log-probs."""
    B = prompts.shape[0]
    resp = torch.zeros(B, R, dtype=torch.long)
    mask = torch.zeros(B, R, dtype=torch.long)
    lps = torch.zeros(B, R)
    with torch.no_grad():
        caches = [[None, None] for _ in actor.blocks]
        lg = actor(prompts, 0, caches)[:, -1]
        rows = torch.arange(B)
        for j in range(R):
            logp = lg.log_softmax(-1)
            tok = torch.multinomial(logp.exp(), 1).squeeze(1)
            resp[rows, j] = tok
            mask[rows, j] = 1
            lps[rows, j] = logp.gather(1, tok.unsqueeze(1)).squeeze(1)
            if j == R - 1:
                break
            keep = tok != EOS
            if not bool(keep.any()):
                break
            if not bool(keep.all()):
                rows, tok = rows[keep], tok[keep]
                for c in caches:
                    c[0], c[1] = c[0][keep], c[1][keep]
            lg = actor(tok.unsqueeze(1), P + j, caches)[:, -1]
    return resp, mask, lps


def log_probs(model, seq, resp, with_entropy):
    """Log-probs (and entropy) of the response tokens, micro-batches of MICRO rows."""
    outs, ents = [], []
    for i in range(0, seq.shape[0], MICRO):
        lg = model(seq[i:i + MICRO, :-1])[:, P - 1:]
        logp = lg.log_softmax(-1)
        outs.append(logp.gather(-1, resp[i:i + MICRO].unsqueeze(-1)).squeeze(-1))
        if with_entropy:
            ents.append(-(logp.exp() * logp).sum(-1))
    return torch.cat(outs), (torch.cat(ents) if with_entropy else None)


def step(actor, ref, opt, prompts, target):
    t = {}
    t0 = time.perf_counter()
    resp, mask, _ = generate(actor, prompts)
    t["gen"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    n = min(resp.shape[1], target.shape[1])
    score = ((resp[:, :n] == target[:, :n]) & (mask[:, :n] > 0)).float().sum(1) / n
    t["reward"] = time.perf_counter() - t0
    seq = torch.cat([prompts, resp], 1)
    fmask = mask.float()
    t0 = time.perf_counter()
    with torch.no_grad():
        old, _ = log_probs(actor, seq, resp, True)
    t["old_log_prob"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    with torch.no_grad():
        ref_lp, _ = log_probs(ref, seq, resp, False)
    t["ref"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    g = score.view(-1, N_SAMPLES)
    adv_row = ((g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + 1e-6)).view(-1)
    adv = adv_row.unsqueeze(1) * fmask
    t["adv"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(0, seq.shape[0], MINI):
        sl = slice(i, i + MINI)
        opt.zero_grad(set_to_none=False)
        lp, _ = log_probs(actor, seq[sl], resp[sl], False)
        m = fmask[sl]
        ratio = torch.exp(lp - old[sl])
        a = adv[sl]
        pg1, pg2 = -a * ratio, -a * ratio.clamp(0.8, 1.2)
        pg = torch.maximum(pg1, pg2)
        pg = torch.where(a < 0, torch.minimum(pg, -a * 3.0), pg)  # dual clip, clip_ratio_c = 3
        kl = ref_lp[sl] - lp
        low_var_kl = (torch.exp(kl) - kl - 1).clamp(-10, 10)
        loss = ((pg + 0.001 * low_var_kl) * m).sum() / m.sum().clamp(min=1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(actor.parameters(), 1.0)
        opt.step()
    t["update_actor"] = time.perf_counter() - t0
    t["step"] = sum(t.values())
    t["response_length"] = float(mask.sum(1).float().mean())
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="build/benchmarks/trainer/bench_trainer")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    torch.manual_seed(0)
    load0 = os.getloadavg()[0]
    actor, ref = GPT(), GPT()
    ref.load_state_dict(actor.state_dict())
    opt = torch.optim.AdamW(actor.parameters(), lr=1e-6, weight_decay=0.0)
    prompts = torch.randint(3, V, (PROMPTS, P)).repeat_interleave(N_SAMPLES, 0)
    prompts[:, 0] = 1  # BOS
    target = torch.randint(3, V, (PROMPTS * N_SAMPLES, R))
    step(actor, ref, opt, prompts, target)  # warm-up
    runs = [step(actor, ref, opt, prompts, target) for _ in range(a.reps)]
    torch_t = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    load1 = os.getloadavg()[0]

    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([a.bench, "--benchmark_filter=SideBySide/workers:1/", f"--benchmark_repetitions={a.reps}",
                          "--benchmark_report_aggregates_only=true", "--benchmark_format=json"],
                         capture_output=True, text=True, check=True, env=env)
    rows = json.loads(out.stdout)["benchmarks"]
    b = ([x for x in rows if x.get("aggregate_name") == "median"] or rows)[0]
    load2 = os.getloadavg()[0]
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()} (rlflow: OMP_NUM_THREADS={threads}, "
          f"OPENBLAS_NUM_THREADS=1, one worker); load average {load0:.1f} / {load1:.1f} / {load2:.1f}")
    print(f"mean response length: pytorch {torch_t['response_length']:.1f}, rlflow {b['response_length']:.1f}")
    print(f"| stage | PyTorch eager s | rlflow s | rlflow / PyTorch |")
    print(f"| --- | --- | --- | --- |")
    for k in ["gen", "old_log_prob", "ref", "adv", "update_actor", "step"]:
        rl = b["real_time"] / 1e3 if k == "step" else b[k]
        print(f"| {k} | {torch_t[k]:.3f} | {rl:.3f} | {rl / torch_t[k]:.2f} |")
    print(f"(not compared: reward pytorch {torch_t['reward'] * 1e3:.2f} ms, rlflow {b['reward'] * 1e3:.2f} ms; "
          f"rlflow update_weights {b['update_weights'] * 1e3:.2f} ms)")


if __name__ == "__main__":
    main()
