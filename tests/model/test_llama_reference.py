#!/usr/bin/env python3
"""Self-tests of llama_reference.py on tiny random folders of each family: gradients against
central finite differences, logits against a loop-by-loop forward written here (per row, per head,
per query; RoPE by explicit pair rotation), prefix / left-padding invariance, the KV-cache greedy
against recomputation, llama3 inv_freq against the formula written out here, sharded / BF16 / F16
folders against the F32 one, and bad inputs. Prints 'rlflow-skip: ...' without torch."""
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile
import unittest

try:
    import torch
except ImportError:
    print("rlflow-skip: this python has no torch (use Debian's /usr/bin/python3)")
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "llama_reference.py")
sys.path.insert(0, HERE)
import llama_reference as ref  # noqa: E402

FAMILIES = {
    # name: make-random arguments
    "llama": ["--arch", "llama", "--heads", "4", "--kv-heads", "2", "--rope-type", "llama3",
              "--rope-theta", "500000", "--rope-orig", "16", "--rope-factor", "4",
              "--attention-bias", "--mlp-bias"],
    "qwen2": ["--arch", "qwen2", "--heads", "2", "--kv-heads", "1", "--tied", "--rope-theta", "1000000"],
    "qwen3": ["--arch", "qwen3", "--heads", "4", "--kv-heads", "2", "--head-dim", "10",
              "--attention-bias", "--rope-type", "linear", "--rope-factor", "2",
              "--rope-spelling", "parameters"],
    "gqa1": ["--arch", "llama", "--heads", "3", "--kv-heads", "3", "--tied", "--rope-type", "llama3",
             "--rope-spelling", "type", "--rope-orig", "32"],
    "gqa4": ["--arch", "qwen3", "--heads", "4", "--kv-heads", "1", "--head-dim", "8", "--tied"],
}


def make(tmp, name, extra=(), seed=7):
    d = os.path.join(tmp, name)
    ref.main(["--make-random", d, "--seed", str(seed)] + FAMILIES.get(name, []) + list(extra))
    return d


def cli(model_dir, request, tmp, tag="x"):
    inp, out = os.path.join(tmp, f"in_{tag}.json"), os.path.join(tmp, f"out_{tag}.json")
    with open(inp, "w") as f:
        json.dump(request, f)
    p = subprocess.run([sys.executable, SCRIPT, model_dir, inp, out], capture_output=True, text=True)
    if p.returncode:
        raise AssertionError(f"llama_reference.py failed ({p.returncode}): {p.stderr}")
    with open(out) as f:
        return json.load(f)


def random_batch(rng, cfg, B, T, pads):
    ids = [[rng.randrange(cfg.vocab_size) for _ in range(T)] for _ in range(B)]
    mask = [[0] * p + [1] * (T - p) for p in pads]
    return ids, mask


# ---- independent pieces written from the formulas

def inv_freq_formula(theta, d, rope_type, r):
    """Vectorised inv_freq: default, linear, llama3 (piecewise by wavelength, smooth blend)."""
    f = theta ** -(torch.arange(0, d, 2, dtype=torch.float64) / d)
    if rope_type == "linear":
        return f / r["factor"]
    if rope_type != "llama3":
        return f
    orig, lo, hi, k = (r["original_max_position_embeddings"], r["low_freq_factor"],
                       r["high_freq_factor"], r["factor"])
    wl = 2 * math.pi / f
    smooth = ((orig / wl) - lo) / (hi - lo)
    blended = (1 - smooth) * f / k + smooth * f
    return torch.where(wl < orig / hi, f, torch.where(wl > orig / lo, f / k, blended))


def loop_forward(cfg, P, ids, mask):
    """Logits (B, T, V) one row, head and query at a time; RoPE rotates (i, i + d/2) pairs."""
    B, T = len(ids), len(ids[0])
    H, K, hd = cfg.heads, cfg.kv_heads, cfg.head_dim
    inv = inv_freq_formula(cfg.rope_theta, hd, cfg.rope_type, cfg.rope)

    def norm(v, w):
        return v / torch.sqrt((v * v).sum() / v.numel() + cfg.eps) * w

    def lin(v, name):
        y = P[name + ".weight"] @ v
        return y + P[name + ".bias"] if name + ".bias" in P else y

    def rot(v, pos):
        out = v.clone()
        half = hd // 2
        for i in range(half):
            c, s = math.cos(pos * inv[i].item()), math.sin(pos * inv[i].item())
            out[i] = v[i] * c - v[i + half] * s
            out[i + half] = v[i + half] * c + v[i] * s
        return out

    head = P["model.embed_tokens.weight"] if cfg.tied else P["lm_head.weight"]
    logits = torch.zeros(B, T, cfg.vocab_size, dtype=torch.float64)
    for b in range(B):
        pos, c = [], -1
        for t in range(T):
            c += mask[b][t]
            pos.append(max(c, 0))
        xs = [P["model.embed_tokens.weight"][ids[b][t]].clone() for t in range(T)]
        for l in range(cfg.layers):
            p = f"model.layers.{l}.self_attn."
            hs = [norm(x, P[f"model.layers.{l}.input_layernorm.weight"]) for x in xs]
            qs, ks, vs = [], [], []
            for t in range(T):
                q = lin(hs[t], p + "q_proj").view(H, hd)
                k = lin(hs[t], p + "k_proj").view(K, hd)
                v = lin(hs[t], p + "v_proj").view(K, hd)
                if cfg.qk_norm:
                    q = torch.stack([norm(q[h], P[p + "q_norm.weight"]) for h in range(H)])
                    k = torch.stack([norm(k[j], P[p + "k_norm.weight"]) for j in range(K)])
                qs.append([rot(q[h], pos[t]) for h in range(H)])
                ks.append([rot(k[j], pos[t]) for j in range(K)])
                vs.append([v[j] for j in range(K)])
            new = []
            for t in range(T):
                heads_out = []
                for h in range(H):
                    j = h // (H // K)
                    keys = [s for s in range(t + 1) if mask[b][s]] if mask[b][t] else [t]
                    sc = [float(qs[t][h] @ ks[s][j]) / math.sqrt(hd) for s in keys]
                    m = max(sc)
                    e = [math.exp(x - m) for x in sc]
                    z = sum(e)
                    heads_out.append(sum((ei / z) * vs[s][j] for ei, s in zip(e, keys)))
                a = torch.cat(heads_out)
                x = xs[t] + lin(a, p + "o_proj")
                h2 = norm(x, P[f"model.layers.{l}.post_attention_layernorm.weight"])
                mp = f"model.layers.{l}.mlp."
                g = lin(h2, mp + "gate_proj")
                new.append(x + lin(g / (1 + torch.exp(-g)) * lin(h2, mp + "up_proj"), mp + "down_proj"))
            xs = new
        for t in range(T):
            logits[b, t] = head @ norm(xs[t], P["model.norm.weight"])
    return logits


def loss_by_loops(logits, ids, mask, h0, R):
    """Mean over the loss set of log_softmax(logits[b, t])[ids[b, t+1]], by explicit loops."""
    total, n = 0.0, 0
    B, T = len(ids), len(ids[0])
    for b in range(B):
        for t in range(h0, min(h0 + R - 1, T - 1)):
            if mask[b][t] and mask[b][t + 1]:
                row = logits[b][t]
                m = max(row)
                lse = m + math.log(sum(math.exp(v - m) for v in row))
                total += row[ids[b][t + 1]] - lse
                n += 1
    return total / n


class LlamaReference(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        cls.tmp = cls._tmp.name

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_logits_loss_and_grads_per_family(self):
        """CLI logits vs the loop forward; loss vs its loop definition; grads vs finite differences."""
        rng = random.Random(11)
        for fam in ["llama", "qwen2", "qwen3", "gqa1", "gqa4"]:
            with self.subTest(family=fam):
                d = make(self.tmp, fam, seed=len(fam) + 3)
                cfg, P = ref.load_model(d)
                ids, mask = random_batch(rng, cfg, 4, 7, [0, 2, 4, 1])
                mask[3][3] = 0                       # a hole: positions skip it, no query sees it
                h0, R = (1, 5) if fam != "gqa1" else (0, 7)
                out = cli(d, {"ids": ids, "mask": mask, "want": ["logits", "grads", "logprobs"],
                              "loss_rows": [h0, R]}, self.tmp, fam)
                got = torch.tensor(out["logits"], dtype=torch.float64)
                want = loop_forward(cfg, P, ids, mask)
                valid = torch.tensor(mask, dtype=torch.bool)
                err = (got - want)[valid].abs().max().item()
                self.assertLess(err, 1e-10, f"{fam}: logits differ from the loop forward by {err}")
                self.assertTrue(torch.isfinite(got).all())
                self.assertAlmostEqual(out["loss"], loss_by_loops(out["logits"], ids, mask, h0, R), delta=1e-11)

                shapes = ref.expected_shapes(cfg)
                self.assertEqual(set(out["grads"]), set(shapes))
                self.assertEqual(cfg.tied, "lm_head.weight" not in out["grads"])
                ids_t, mask_t = torch.tensor(ids), torch.tensor(mask)

                def loss_at(name, idx, delta):
                    Q = dict(P)
                    Q[name] = P[name].clone()
                    Q[name].view(-1)[idx] += delta
                    return ref.mean_logprob(cfg, Q, ids_t, mask_t, (h0, R))[0].item()

                worst = 0.0
                for name, shape in shapes.items():
                    g = out["grads"][name]
                    self.assertEqual(len(g), math.prod(shape), name)
                    for idx in rng.sample(range(len(g)), min(3, len(g))):
                        e = 1e-5
                        fd = (loss_at(name, idx, e) - loss_at(name, idx, -e)) / (2 * e)
                        worst = max(worst, abs(fd - g[idx]) / (1e-6 + abs(fd)))
                        self.assertLess(abs(fd - g[idx]), 1e-7 + 1e-5 * abs(fd),
                                        f"{fam}: d loss / d {name}[{idx}] = {g[idx]}, finite difference {fd}")
                # The gradient is not trivially zero and padding never receives gradient.
                emb = torch.tensor(out["grads"]["model.embed_tokens.weight"])
                self.assertGreater(emb.abs().max().item(), 1e-6)

    def test_prefix_padding_and_greedy(self):
        """A prefix's logits are the first positions of the full row's; left padding changes
        nothing at real positions; the KV-cache greedy equals argmax recomputation."""
        rng = random.Random(5)
        for fam in ["llama", "qwen3", "gqa4"]:
            with self.subTest(family=fam):
                d = make(self.tmp, fam, ["--init-scale", "0.6"], seed=3)
                cfg, P = ref.load_model(d)
                T = 9
                ids = [[rng.randrange(cfg.vocab_size) for _ in range(T)] for _ in range(2)]
                full = ref.logits_of(cfg, P, torch.tensor(ids), torch.ones(2, T, dtype=torch.long))
                for k in (1, 4, 8):
                    pre = ref.logits_of(cfg, P, torch.tensor(ids)[:, :k], torch.ones(2, k, dtype=torch.long))
                    self.assertLess((pre - full[:, :k]).abs().max().item(), 1e-12)
                pad = 3
                junk = [rng.randrange(cfg.vocab_size) for _ in range(pad)]
                pids = [junk + ids[0], [ids[1][0]] * pad + ids[1]]
                pmask = [[0] * pad + [1] * T, [0] * pad + [1] * T]
                padded = ref.logits_of(cfg, P, torch.tensor(pids), torch.tensor(pmask))
                self.assertLess((padded[:, pad:] - full).abs().max().item(), 1e-12)

                steps = 6
                g_pad = ref.greedy(cfg, P, torch.tensor(pids), torch.tensor(pmask), steps).tolist()
                step_logits = []
                g_plain = ref.greedy(cfg, P, torch.tensor(ids), torch.ones(2, T, dtype=torch.long), steps,
                                     step_logits=step_logits).tolist()
                self.assertEqual(g_pad, g_plain)
                for b in range(2):
                    seq = list(ids[b])
                    for s in range(steps):
                        lg = ref.logits_of(cfg, P, torch.tensor([seq]), torch.ones(1, len(seq), dtype=torch.long))
                        self.assertLess((lg[0, -1] - step_logits[s][b]).abs().max().item(), 1e-11,
                                        f"{fam} row {b} step {s}: KV-cache logits vs recompute")
                        row = lg[0, -1].tolist()
                        seq.append(row.index(max(row)))
                    self.assertEqual(seq[T:], g_plain[b], f"{fam} row {b}: KV-cache greedy vs recompute")
                out = cli(d, {"ids": pids, "mask": pmask, "want": ["greedy"], "greedy_steps": steps},
                          self.tmp, "greedy_" + fam)
                self.assertEqual(out["greedy"], g_plain)

    def test_family_tensor_sets(self):
        """Which biases and norms each family owns, per the transformers modules."""
        def names(arch, **kw):
            raw = {"model_type": arch, "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
                   "num_hidden_layers": 1, "num_attention_heads": 2, "rms_norm_eps": 1e-6, **kw}
            return {n[len("model.layers.0."):] for n in ref.expected_shapes(ref.Config(raw))
                    if n.startswith("model.layers.0.") and not n.endswith("proj.weight")}
        ln = {"input_layernorm.weight", "post_attention_layernorm.weight"}
        qkv = {f"self_attn.{x}_proj.bias" for x in "qkv"}
        qk = {"self_attn.q_norm.weight", "self_attn.k_norm.weight"}
        mlp = {f"mlp.{x}_proj.bias" for x in ("gate", "up", "down")}
        self.assertEqual(names("llama"), ln)
        self.assertEqual(names("llama", attention_bias=True, mlp_bias=True), ln | qkv | {"self_attn.o_proj.bias"} | mlp)
        self.assertEqual(names("qwen2"), ln | qkv)
        self.assertEqual(names("qwen2", attention_bias=False, mlp_bias=True), ln | qkv)
        self.assertEqual(names("qwen3"), ln | qk)
        self.assertEqual(names("qwen3", attention_bias=True, mlp_bias=True), ln | qk | qkv | {"self_attn.o_proj.bias"})
        top = lambda **kw: {n for n in ref.expected_shapes(ref.Config(  # noqa: E731
            {"model_type": "qwen2", "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
             "num_hidden_layers": 1, "num_attention_heads": 2, "rms_norm_eps": 1e-6, **kw})) if "layers" not in n}
        self.assertEqual(top(tie_word_embeddings=True), {"model.embed_tokens.weight", "model.norm.weight"})
        self.assertEqual(top(), {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"})

    def test_bin_output_matches_json(self):
        d = make(self.tmp, "qwen2", seed=21)
        req = {"ids": [[5, 9, 1, 40, 2], [0, 0, 3, 3, 7]], "mask": [[1] * 5, [0, 0, 1, 1, 1]],
               "want": ["logits", "logprobs", "grads", "greedy"], "greedy_steps": 4}
        js = cli(d, req, self.tmp, "js")
        bn = cli(d, dict(req, out_format="bin"), self.tmp, "bn")
        with open(os.path.join(self.tmp, bn["logits"]["file"]), "rb") as f:
            data = f.read()

        def load(entry):
            vals = struct.unpack_from(f"<{entry['count']}d", data, entry["offset"])
            return torch.tensor(vals, dtype=torch.float64).reshape(entry["shape"])

        self.assertTrue(torch.equal(load(bn["logits"]), torch.tensor(js["logits"], dtype=torch.float64)))
        self.assertTrue(torch.equal(load(bn["logprobs"]), torch.tensor(js["logprobs"], dtype=torch.float64)))
        for n, g in js["grads"].items():
            self.assertEqual(bn["grads"][n]["shape"], js["shapes"][n])
            self.assertTrue(torch.equal(load(bn["grads"][n]).flatten(), torch.tensor(g, dtype=torch.float64)), n)
        self.assertEqual(bn["greedy"], js["greedy"])
        self.assertEqual(bn["loss"], js["loss"])
        self.assertEqual(len(data), 8 * sum(e["count"] for e in [bn["logits"], bn["logprobs"]] + list(bn["grads"].values())))

    def test_argmax_ties_lowest_id(self):
        x = torch.tensor([[0.0, 2.0, 1.0, 2.0], [3.0, 3.0, 3.0, 3.0], [-1.0, -5.0, -1.0, -2.0]],
                         dtype=torch.float64)
        self.assertEqual(ref.argmax_lowest(x).tolist(), [1, 0, 0])

    def test_float32_close_to_float64(self):
        d = make(self.tmp, "qwen3", seed=9)
        ids = [[3, 14, 15, 9, 26, 5, 35, 8]]
        o64 = cli(d, {"ids": ids, "want": ["logits"]}, self.tmp, "f64")
        o32 = cli(d, {"ids": ids, "want": ["logits"], "dtype": "float32", "rope_fp32": True}, self.tmp, "f32")
        a, b = torch.tensor(o64["logits"]), torch.tensor(o32["logits"])
        err = (a - b).abs().max().item()
        self.assertLess(err, 1e-4)
        self.assertGreater(err, 0.0, "float32 must actually compute in float32")

    def test_llama3_inv_freq(self):
        for theta, d, r in [(500000.0, 64, dict(factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                                    original_max_position_embeddings=8192.0)),
                            (500000.0, 128, dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                                 original_max_position_embeddings=8192.0)),
                            (10000.0, 16, dict(factor=4.0, low_freq_factor=2.0, high_freq_factor=8.0,
                                               original_max_position_embeddings=64.0))]:
            cfg = ref.Config({"model_type": "llama", "vocab_size": 8, "hidden_size": d, "intermediate_size": 8,
                              "num_hidden_layers": 1, "num_attention_heads": 1, "rms_norm_eps": 1e-5,
                              "rope_theta": theta, "rope_scaling": dict(r, rope_type="llama3")})
            got = ref.rope_inv_freq(cfg)
            want = inv_freq_formula(theta, d, "llama3", r)
            self.assertLess((got - want).abs().max().item() / want.abs().max().item(), 1e-14)
            # All three regimes occur: kept, divided by factor, blended.
            base = inv_freq_formula(theta, d, "default", r)
            kept = torch.isclose(got, base, rtol=1e-15, atol=0)
            div = torch.isclose(got, base / r["factor"], rtol=1e-15, atol=0)
            self.assertTrue(kept.any() and div.any() and (~kept & ~div).any(), f"d={d}")
            g32 = ref.rope_inv_freq(cfg, torch.float32).double()
            self.assertLess(((g32 - want) / want).abs().max().item(), 1e-5)
        # The three config spellings resolve to the same frequencies.
        runs = []
        for spelling in ["scaling", "type", "parameters"]:
            d = make(self.tmp, "sp_" + spelling, ["--arch", "llama", "--rope-type", "llama3",
                                                  "--rope-spelling", spelling, "--rope-theta", "5e5"])
            runs.append(ref.rope_inv_freq(ref.load_config(d)))
        self.assertTrue(torch.equal(runs[0], runs[1]) and torch.equal(runs[0], runs[2]))

    def test_sharded_and_half_precision_folders(self):
        base = ["--arch", "qwen2", "--heads", "2", "--kv-heads", "1"]
        w32 = ref.load_weights(make(self.tmp, "w32", base, seed=4))
        w_sh = ref.load_weights(make(self.tmp, "wsh", base + ["--shards", "3"], seed=4))
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "wsh", "model.safetensors.index.json")))
        self.assertEqual(set(w32), set(w_sh))
        for n in w32:
            self.assertTrue(torch.equal(w32[n], w_sh[n]), n)

        def bf16(x):  # float32 -> bf16 by integer round-to-nearest-even
            u = struct.unpack("<I", struct.pack("<f", x))[0]
            u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
            return struct.unpack("<f", struct.pack("<I", u & 0xFFFFFFFF))[0]

        def f16(x):
            return struct.unpack("<e", struct.pack("<e", x))[0]

        for dt, conv in (("BF16", bf16), ("F16", f16)):
            w = ref.load_weights(make(self.tmp, "w" + dt, base + ["--dtype", dt], seed=4))
            for n in w32:
                want = torch.tensor([conv(v) for v in w32[n].flatten().tolist()], dtype=torch.float64)
                self.assertTrue(torch.equal(w[n].flatten(), want), f"{dt} {n}")
            self.assertGreater(max((w[n] - w32[n]).abs().max().item() for n in w32), 0.0)

    def test_bad_inputs_name_the_problem(self):
        d = make(self.tmp, "bad", ["--arch", "llama"], seed=2)
        cfg = ref.load_config(d)
        st = os.path.join(d, "model.safetensors")
        w = ref.read_safetensors(st)

        def expect(fragment, fn):
            with self.assertRaises(ref.RefError) as c:
                fn()
            self.assertIn(fragment, str(c.exception))

        ok = dict(w)
        del ok["model.layers.1.mlp.up_proj.weight"]
        expect("model.layers.1.mlp.up_proj.weight", lambda: ref.check_weights(cfg, dict(ok), "x"))
        ok = dict(w, **{"model.layers.0.self_attn.q_proj.bias": torch.zeros(24)})
        expect("model.layers.0.self_attn.q_proj.bias", lambda: ref.check_weights(cfg, dict(ok), "x"))
        ok = dict(w, **{"model.norm.weight": torch.zeros(23)})
        expect("[23]", lambda: ref.check_weights(cfg, dict(ok), "x"))
        expect("model_type", lambda: ref.Config({"model_type": "gpt2"}))
        with open(os.path.join(d, "config.json")) as f:
            raw = json.load(f)
        expect("num_key_value_heads 3", lambda: ref.Config(dict(raw, num_key_value_heads=3)))
        expect("yarn", lambda: ref.Config(dict(raw, rope_scaling={"rope_type": "yarn", "factor": 4.0})))
        expect("low_freq_factor", lambda: ref.Config(dict(raw, rope_scaling={"rope_type": "llama3", "factor": 8.0})))
        expect("token id 61", lambda: ref.parse_request({"ids": [[1, 61]]}, cfg))
        expect("mask row 0", lambda: ref.parse_request({"ids": [[1, 2]], "mask": [[0, 0]]}, cfg))
        expect("loss_rows", lambda: ref.parse_request({"ids": [[1, 2, 3]], "loss_rows": [2, 2]}, cfg))

        # The command line: exit status 2 and one line naming the file.
        with open(st, "rb") as f:
            blob = f.read()
        cut = os.path.join(self.tmp, "cut")
        os.makedirs(cut, exist_ok=True)
        with open(os.path.join(cut, "config.json"), "w") as f:
            json.dump(raw, f)
        with open(os.path.join(cut, "model.safetensors"), "wb") as f:
            f.write(blob[: len(blob) - 16])
        inp = os.path.join(self.tmp, "in_cut.json")
        with open(inp, "w") as f:
            json.dump({"ids": [[1, 2]]}, f)
        p = subprocess.run([sys.executable, SCRIPT, cut, inp, os.path.join(self.tmp, "o.json")],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertRegex(p.stderr, r"^llama_reference: error: .*model\.safetensors: tensor '.*' data_offsets")

        # Mutated files either load or raise RefError, never another exception.
        rng = random.Random(1)
        mut = os.path.join(self.tmp, "mut.safetensors")
        (n,) = struct.unpack("<Q", blob[:8])
        for _ in range(300):
            b = bytearray(blob[: 8 + n + 64] if rng.random() < 0.3 else blob)
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(8 + n + 8)
                b[min(i, len(b) - 1)] = rng.randrange(256)
            with open(mut, "wb") as f:
                f.write(b)
            try:
                ref.read_safetensors(mut)
            except ref.RefError:
                pass


if __name__ == "__main__":
    torch.set_num_threads(1)
    prog = unittest.main(exit=False, verbosity=2)
    sys.exit(0 if prog.result.wasSuccessful() else 1)
