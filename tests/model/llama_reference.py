#!/usr/bin/env python3
"""Plain PyTorch reference of the Llama family (LlamaForCausalLM, Qwen2ForCausalLM,
Qwen3ForCausalLM) for testing rlflow's C++ engines. Needs only torch and the standard library.

Written from the semantics of transformers' modeling_llama.py, modeling_qwen2.py,
modeling_qwen3.py and modeling_rope_utils.py (default / linear / llama3 RoPE):

  x = embed_tokens[ids]
  per layer:  h = input_layernorm(x)
              q, k, v = q_proj(h), k_proj(h), v_proj(h)       viewed (B, T, heads, head_dim)
              qwen3:  q, k = q_norm(q), k_norm(k)             RMSNorm over head_dim, per head
              q, k = rope(q), rope(k)                         half split: rotate_half(x) = [-x2, x1]
              k, v repeated per group (KV head j serves query heads j*g .. j*g+g-1)
              attn = softmax(q k^T / sqrt(head_dim) + causal/padding mask) v
              x = x + o_proj(attn)
              x = x + down_proj(silu(gate_proj(h2)) * up_proj(h2)),  h2 = post_attention_layernorm(x)
  logits = lm_head(norm(x))   (lm_head = embed_tokens when tie_word_embeddings)
  RMSNorm(x) = x * rsqrt(mean(x^2) + rms_norm_eps) * weight

Biases: llama: q/k/v/o_proj bias iff attention_bias, gate/up/down bias iff mlp_bias;
qwen2: q/k/v bias always, o_proj none, MLP none; qwen3: q/k/v/o bias iff attention_bias, MLP none.
RoPE: inv_freq[i] = 1 / rope_theta^(2i/head_dim), i < head_dim/2; linear divides it by factor;
llama3 keeps frequencies whose wavelength 2*pi/f is below orig/high_freq_factor, divides those
above orig/low_freq_factor by factor and blends the rest with
s = (orig/wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor),
f' = (1 - s) * f / factor + s * f. The cos/sin attention factor is 1.0 for these three types.
Everything is computed in float64 unless IN.json asks for "dtype": "float32"; with
"rope_fp32": true, inv_freq, angles and cos/sin are computed in float32 as transformers does
(then cast to the compute dtype).

Usage
  llama_reference.py MODEL_DIR IN.json OUT.json
  llama_reference.py --make-random MODEL_DIR --arch {llama,qwen2,qwen3} --seed N [--tied] [...]

MODEL_DIR: config.json (model_type llama / qwen2 / qwen3) and model.safetensors or a sharded
model.safetensors.index.json ({"weight_map": {name: file}}). Tensors: F32, F16, BF16 (F64 too).

IN.json
  "ids":  [[int]*T]*B               token ids, every row the same length T
  "mask": [[0|1]*T]*B (optional)    1 = real token (left padding); all ones when absent.
                                    positions = max(cumsum(mask) - 1, 0); a query attends to the
                                    keys at or before it whose mask is 1. Logits at mask-0
                                    positions are finite but meaningless (such a query attends
                                    to itself only).
  "want": subset of ["logits", "logprobs", "greedy", "grads"]   (default ["logits"])
  "greedy_steps": int (default 32)
  "loss_rows": [h0, R] (optional; default [0, T])
  "dtype": "float64" (default) | "float32"
  "rope_fp32": bool (default false)
  "out_format": "json" (default) | "bin"

The loss (reported as "loss"; "grads" are its gradients) is the MEAN LOG-PROBABILITY of the next
token (not negated):
  L = (1/N) * sum over (b, t) in S of log_softmax(logits[b, t])[ids[b, t + 1]]
  S = {(b, t) : h0 <= t < h0 + R - 1, t + 1 < T, mask[b, t] = 1, mask[b, t + 1] = 1},  N = |S| > 0.

OUT.json
  "loss": float (when "grads" or "logprobs" is wanted)
  "logits": (B, T, V) nested lists
  "logprobs": (B, T - 1) nested lists, log_softmax(logits[b, t])[ids[b, t + 1]]
  "greedy": (B, greedy_steps) ints: argmax continuation of each full row (the row's own padding
            kept; argmax ties go to the lowest id; KV cache; no stop token)
  "grads": {HF tensor name: flat row-major list, the file's shape}; every parameter in the
           folder (a tied model has no lm_head.weight: its gradient is in model.embed_tokens.weight)
  "shapes": {HF tensor name: shape} of the grads
  "inv_freq": the RoPE inverse frequencies used; "dtype"; "positions": (B, T)
With "out_format": "bin", "logits", "logprobs" and each entry of "grads" are instead
  {"file": "<OUT stem>.bin", "offset": byte offset, "count": elements, "shape": [...]}
and the values are float64 little-endian in that file, next to OUT.json.

Errors (bad config, missing / misshaped / unexpected tensors, malformed safetensors, bad IN.json)
exit with status 2 and one line "llama_reference: error: ..." on stderr.
"""
import argparse
import array
import json
import math
import os
import struct
import sys

import torch


class RefError(Exception):
    """Bad input: a message naming the thing, the numbers and the fix."""


# ---------------------------------------------------------------- safetensors

_ST_DTYPES = {"F64": (torch.float64, 8), "F32": (torch.float32, 4), "F16": (torch.float16, 2),
              "BF16": (torch.bfloat16, 2)}
# Integer twins for byte-exact writing without numpy.
_INT_TWIN = {torch.float64: (torch.int64, "q"), torch.float32: (torch.int32, "i"),
             torch.float16: (torch.int16, "h"), torch.bfloat16: (torch.int16, "h")}


def read_safetensors(path):
    """{name: float64 tensor} from a safetensors file (safetensors' format: u64 LE header length,
    JSON header {name: {dtype, shape, data_offsets}}, then the data)."""
    if sys.byteorder != "little":
        raise RefError("safetensors reading assumes a little-endian host")
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise RefError(f"{path}: {size} bytes, shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            raise RefError(f"{path}: header length {n} exceeds the file's remaining {size - 8} bytes")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise RefError(f"{path}: header is not JSON ({e}); the file is not safetensors") from None
        if not isinstance(header, dict):
            raise RefError(f"{path}: header is {type(header).__name__}, expected a JSON object")
        base = 8 + n
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
                raise RefError(f"{path}: tensor '{name}' lacks dtype/shape/data_offsets")
            dt = info["dtype"]
            if not isinstance(dt, str) or dt not in _ST_DTYPES:
                raise RefError(f"{path}: tensor '{name}' has dtype {dt!r}; supported: F32, F16, BF16, F64")
            shape, offs = info["shape"], info["data_offsets"]
            if (not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)
                    or not isinstance(offs, list) or len(offs) != 2
                    or not all(isinstance(o, int) for o in offs)):
                raise RefError(f"{path}: tensor '{name}' has shape {shape!r} / data_offsets {offs!r}; "
                               "expected non-negative ints and [begin, end]")
            tdt, width = _ST_DTYPES[dt]
            count = math.prod(shape)
            b, e = offs
            if not (0 <= b <= e and base + e <= size) or e - b != count * width:
                raise RefError(f"{path}: tensor '{name}' data_offsets [{b}, {e}] do not hold "
                               f"{count} x {width}-byte {dt} inside the {size - base}-byte data")
            f.seek(base + b)
            buf = bytearray(f.read(e - b))
            t = torch.frombuffer(buf, dtype=tdt) if count else torch.zeros(0, dtype=tdt)
            out[name] = t.to(torch.float64).reshape(shape)
    return out


def write_safetensors(path, tensors, dtype="F32"):
    """Writes {name: tensor} as one safetensors file, every tensor converted to dtype."""
    tdt, width = _ST_DTYPES[dtype]
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        c = t.detach().to(tdt).contiguous()
        itype, code = _INT_TWIN[tdt]
        blob = array.array(code, c.view(itype).flatten().tolist()).tobytes()
        header[name] = {"dtype": dtype, "shape": list(c.shape), "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    h = json.dumps(header).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_weights(model_dir):
    """{name: float64 tensor} from model.safetensors or model.safetensors.index.json."""
    single = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            try:
                wmap = json.load(f).get("weight_map")
            except (json.JSONDecodeError, AttributeError) as e:
                raise RefError(f"{index}: not a JSON object with 'weight_map' ({e})") from None
        if not isinstance(wmap, dict) or not wmap:
            raise RefError(f"{index}: 'weight_map' must be a non-empty object {{tensor: file}}")
        weights = {}
        for shard in sorted(set(wmap.values())):
            p = os.path.join(model_dir, shard)
            if not os.path.exists(p):
                raise RefError(f"{index}: shard '{shard}' is missing from {model_dir}")
            for name, t in read_safetensors(p).items():
                if wmap.get(name) != shard:
                    raise RefError(f"{p}: holds '{name}', which weight_map assigns to {wmap.get(name)!r}")
                weights[name] = t
        missing = sorted(set(wmap) - set(weights))
        if missing:
            raise RefError(f"{index}: weight_map lists {missing[:3]} but their shards lack them")
        return weights
    if os.path.exists(single):
        return read_safetensors(single)
    raise RefError(f"{model_dir}: neither model.safetensors nor model.safetensors.index.json")


# ---------------------------------------------------------------- config

class Config:
    """The fields transformers' LlamaConfig / Qwen2Config / Qwen3Config read, resolved."""

    def __init__(self, raw):
        def need(key, kind=int):
            if key not in raw:
                raise RefError(f"config.json: '{key}' is missing")
            v = raw[key]
            if kind is int and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
                raise RefError(f"config.json: '{key}' = {v!r}; expected a positive integer")
            if kind is float and (not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0):
                raise RefError(f"config.json: '{key}' = {v!r}; expected a positive number")
            return v

        self.model_type = raw.get("model_type")
        if self.model_type not in ("llama", "qwen2", "qwen3"):
            raise RefError(f"config.json: model_type {self.model_type!r}; supported: llama, qwen2, qwen3")
        self.vocab_size = need("vocab_size")
        self.hidden = need("hidden_size")
        self.intermediate = need("intermediate_size")
        self.layers = need("num_hidden_layers")
        self.heads = need("num_attention_heads")
        self.kv_heads = raw.get("num_key_value_heads") or self.heads
        if self.heads % self.kv_heads:
            raise RefError(f"config.json: num_attention_heads {self.heads} is not a multiple of "
                           f"num_key_value_heads {self.kv_heads}")
        hd = raw.get("head_dim")
        if hd is None:
            if self.hidden % self.heads:
                raise RefError(f"config.json: hidden_size {self.hidden} is not a multiple of "
                               f"num_attention_heads {self.heads}; give head_dim explicitly")
            hd = self.hidden // self.heads
        if not isinstance(hd, int) or hd <= 0 or hd % 2:
            raise RefError(f"config.json: head_dim {hd!r} must be a positive even integer (RoPE pairs halves)")
        self.head_dim = hd
        self.eps = float(need("rms_norm_eps", float))
        act = raw.get("hidden_act", "silu")
        if act != "silu":
            raise RefError(f"config.json: hidden_act {act!r}; only 'silu' is supported")
        if raw.get("use_sliding_window"):
            raise RefError("config.json: use_sliding_window is true; sliding-window attention is not "
                           "implemented here (set it false)")
        if raw.get("partial_rotary_factor", 1.0) != 1.0:
            raise RefError(f"config.json: partial_rotary_factor {raw['partial_rotary_factor']} "
                           "is not supported (these families rotate the whole head)")
        self.tied = bool(raw.get("tie_word_embeddings", False))
        if self.model_type == "qwen2":
            self.qkv_bias, self.o_bias, self.mlp_bias = True, False, False
        elif self.model_type == "qwen3":
            ab = bool(raw.get("attention_bias", False))
            self.qkv_bias, self.o_bias, self.mlp_bias = ab, ab, False
        else:
            ab = bool(raw.get("attention_bias", False))
            self.qkv_bias, self.o_bias, self.mlp_bias = ab, ab, bool(raw.get("mlp_bias", False))
        self.qk_norm = self.model_type == "qwen3"

        # RoPE: rope_parameters (holds rope_theta) or rope_scaling + top-level rope_theta.
        rp = raw.get("rope_parameters")
        if isinstance(rp, dict):
            theta = rp.get("rope_theta", raw.get("rope_theta", 10000.0))
            where = "rope_parameters"
        else:
            rp = raw.get("rope_scaling") or {}
            theta = raw.get("rope_theta", 10000.0)
            where = "rope_scaling"
        if not isinstance(rp, dict):
            raise RefError(f"config.json: {where} must be null or an object, got {rp!r}")
        if not isinstance(theta, (int, float)) or not theta > 1:
            raise RefError(f"config.json: rope_theta {theta!r} must be a number > 1")
        self.rope_theta = float(theta)
        self.rope_type = rp.get("rope_type", rp.get("type", "default"))
        if self.rope_type not in ("default", "linear", "llama3"):
            raise RefError(f"config.json: {where} rope type {self.rope_type!r}; supported: default, linear, llama3")
        self.rope = {}
        if self.rope_type in ("linear", "llama3"):
            keys = ["factor"] + (["low_freq_factor", "high_freq_factor", "original_max_position_embeddings"]
                                 if self.rope_type == "llama3" else [])
            for k in keys:
                v = rp.get(k)
                if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
                    raise RefError(f"config.json: {where}.{k} = {v!r}; {self.rope_type} RoPE needs a positive number")
                self.rope[k] = float(v)
            if self.rope_type == "llama3" and not self.rope["high_freq_factor"] > self.rope["low_freq_factor"]:
                raise RefError(f"config.json: {where} high_freq_factor {self.rope['high_freq_factor']} must "
                               f"exceed low_freq_factor {self.rope['low_freq_factor']}")


def load_config(model_dir):
    p = os.path.join(model_dir, "config.json")
    if not os.path.exists(p):
        raise RefError(f"{model_dir}: config.json is missing")
    with open(p) as f:
        try:
            raw = json.load(f)
        except json.JSONDecodeError as e:
            raise RefError(f"{p}: not JSON ({e})") from None
    if not isinstance(raw, dict):
        raise RefError(f"{p}: expected a JSON object")
    return Config(raw)


def expected_shapes(cfg):
    """{HF name: shape} of every parameter the model owns (lm_head only when untied)."""
    D, H, K, hd, I = cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.intermediate
    s = {"model.embed_tokens.weight": [cfg.vocab_size, D], "model.norm.weight": [D]}
    if not cfg.tied:
        s["lm_head.weight"] = [cfg.vocab_size, D]
    for i in range(cfg.layers):
        p = f"model.layers.{i}."
        s[p + "input_layernorm.weight"] = [D]
        s[p + "post_attention_layernorm.weight"] = [D]
        for n, out in (("q", H * hd), ("k", K * hd), ("v", K * hd)):
            s[p + f"self_attn.{n}_proj.weight"] = [out, D]
            if cfg.qkv_bias:
                s[p + f"self_attn.{n}_proj.bias"] = [out]
        s[p + "self_attn.o_proj.weight"] = [D, H * hd]
        if cfg.o_bias:
            s[p + "self_attn.o_proj.bias"] = [D]
        if cfg.qk_norm:
            s[p + "self_attn.q_norm.weight"] = [hd]
            s[p + "self_attn.k_norm.weight"] = [hd]
        s[p + "mlp.gate_proj.weight"] = [I, D]
        s[p + "mlp.up_proj.weight"] = [I, D]
        s[p + "mlp.down_proj.weight"] = [D, I]
        if cfg.mlp_bias:
            s[p + "mlp.gate_proj.bias"] = [I]
            s[p + "mlp.up_proj.bias"] = [I]
            s[p + "mlp.down_proj.bias"] = [D]
    return s


def check_weights(cfg, weights, where):
    """Every expected tensor present with its shape; nothing unexpected (old checkpoints'
    rotary_emb.inv_freq buffers are dropped; a tied model's lm_head.weight must equal the embedding)."""
    want = expected_shapes(cfg)
    for name in [n for n in weights if n.endswith("rotary_emb.inv_freq")]:
        del weights[name]
    if cfg.tied and "lm_head.weight" in weights:
        lm = weights.pop("lm_head.weight")
        emb = weights.get("model.embed_tokens.weight")
        if emb is not None and (lm.shape != emb.shape or not torch.equal(lm, emb)):
            raise RefError(f"{where}: tie_word_embeddings is true but lm_head.weight differs from "
                           "model.embed_tokens.weight; drop lm_head.weight or set tie_word_embeddings false")
    missing = [n for n in want if n not in weights]
    if missing:
        raise RefError(f"{where}: missing {len(missing)} tensor(s) for {cfg.model_type}, e.g. "
                       f"{missing[:3]} (check attention_bias / mlp_bias / tie_word_embeddings)")
    extra = sorted(n for n in weights if n not in want)
    if extra:
        raise RefError(f"{where}: {len(extra)} unexpected tensor(s) for this config.json, e.g. {extra[:3]} "
                       "(check attention_bias / mlp_bias / tie_word_embeddings / num_hidden_layers)")
    for n, shp in want.items():
        if list(weights[n].shape) != shp:
            raise RefError(f"{where}: '{n}' has shape {list(weights[n].shape)}, config.json implies {shp}")


# ---------------------------------------------------------------- model

def rope_inv_freq(cfg, dtype=torch.float64):
    """inv_freq per modeling_rope_utils' default / linear / llama3 rules, one frequency at a time."""
    d = cfg.head_dim
    if dtype == torch.float32:
        # transformers' arithmetic: float32 exponents, python-float base.
        base = cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d)
        f = [float(x) for x in (1.0 / base)]
    else:
        f = [1.0 / (cfg.rope_theta ** (2 * i / d)) for i in range(d // 2)]
    if cfg.rope_type == "linear":
        f = [x / cfg.rope["factor"] for x in f]
    elif cfg.rope_type == "llama3":
        r = cfg.rope
        orig, lo, hi, fac = (r["original_max_position_embeddings"], r["low_freq_factor"],
                             r["high_freq_factor"], r["factor"])
        out = []
        for x in f:
            wl = 2 * math.pi / x
            if wl < orig / hi:
                out.append(x)
            elif wl > orig / lo:
                out.append(x / fac)
            else:
                s = (orig / wl - lo) / (hi - lo)
                out.append((1 - s) * x / fac + s * x)
        f = out
    return torch.tensor(f, dtype=dtype)


def rope_cos_sin(cfg, pos, dtype, rope_fp32):
    """cos, sin of shape (B, T, head_dim): angles pos * inv_freq, duplicated over both halves."""
    work = torch.float32 if rope_fp32 else dtype
    inv = rope_inv_freq(cfg, work)
    ang = pos.to(work)[..., None] * inv
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos().to(dtype), ang.sin().to(dtype)


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def linear(x, P, name):
    y = x @ P[name + ".weight"].t()
    b = P.get(name + ".bias")
    return y + b if b is not None else y


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def forward(cfg, P, ids, pos, key_valid, cache=None, rope_fp32=False):
    """Logits (B, S, V) of the new tokens ids (B, S) at positions pos (B, S).
    key_valid (B, Tpast + S): which keys may be attended. cache: per-layer [k, v] of the past
    (B, kv_heads, Tpast, head_dim), extended in place when given."""
    B, S = ids.shape
    dtype = P["model.embed_tokens.weight"].dtype
    H, K, hd = cfg.heads, cfg.kv_heads, cfg.head_dim
    g = H // K
    past = cache[0][0].shape[2] if cache and cache[0] else 0
    Ttot = past + S
    cos, sin = rope_cos_sin(cfg, pos, dtype, rope_fp32)
    cos, sin = cos[:, None], sin[:, None]                       # (B, 1, S, hd)
    qi = torch.arange(past, Ttot)[:, None]
    kj = torch.arange(Ttot)[None, :]
    allowed = (kj <= qi)[None] & key_valid[:, None, :].bool()   # (B, S, Ttot)
    allowed = allowed | (kj == qi)[None]                        # a padded query sees itself: no NaN
    bias = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, float("-inf"))[:, None]
    x = P["model.embed_tokens.weight"][ids]
    for l in range(cfg.layers):
        p = f"model.layers.{l}."
        h = rms_norm(x, P[p + "input_layernorm.weight"], cfg.eps)
        q = linear(h, P, p + "self_attn.q_proj").view(B, S, H, hd)
        k = linear(h, P, p + "self_attn.k_proj").view(B, S, K, hd)
        v = linear(h, P, p + "self_attn.v_proj").view(B, S, K, hd)
        if cfg.qk_norm:
            q = rms_norm(q, P[p + "self_attn.q_norm.weight"], cfg.eps)
            k = rms_norm(k, P[p + "self_attn.k_norm.weight"], cfg.eps)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache is not None:
            if cache[l]:
                k = torch.cat([cache[l][0], k], dim=2)
                v = torch.cat([cache[l][1], v], dim=2)
            cache[l] = [k, v]
        k = k.repeat_interleave(g, dim=1)                       # head j*g+r uses KV head j
        v = v.repeat_interleave(g, dim=1)
        sc = q @ k.transpose(-1, -2) * hd ** -0.5 + bias
        a = torch.softmax(sc, dim=-1) @ v                       # (B, H, S, hd)
        a = a.transpose(1, 2).reshape(B, S, H * hd)
        x = x + linear(a, P, p + "self_attn.o_proj")
        h = rms_norm(x, P[p + "post_attention_layernorm.weight"], cfg.eps)
        m = torch.nn.functional.silu(linear(h, P, p + "mlp.gate_proj")) * linear(h, P, p + "mlp.up_proj")
        x = x + linear(m, P, p + "mlp.down_proj")
    x = rms_norm(x, P["model.norm.weight"], cfg.eps)
    head = P["model.embed_tokens.weight"] if cfg.tied else P["lm_head.weight"]
    return x @ head.t()


def positions_of(mask):
    return (mask.cumsum(-1) - 1).clamp(min=0)


def logits_of(cfg, P, ids, mask, rope_fp32=False):
    return forward(cfg, P, ids, positions_of(mask), mask, None, rope_fp32)


def loss_terms(ids, mask, loss_rows):
    """Boolean (B, T-1) selection S of the loss (module docstring)."""
    B, T = ids.shape
    h0, R = loss_rows
    t = torch.arange(T - 1)
    sel = (t >= h0) & (t < h0 + R - 1)
    return sel[None, :] & mask[:, :-1].bool() & mask[:, 1:].bool()


def next_logprobs(logits, ids):
    lp = torch.log_softmax(logits[:, :-1], dim=-1)
    return lp.gather(-1, ids[:, 1:, None])[..., 0]


def mean_logprob(cfg, P, ids, mask, loss_rows, rope_fp32=False):
    """L of the module docstring, and the (B, T-1) next-token log-probs."""
    lp = next_logprobs(logits_of(cfg, P, ids, mask, rope_fp32), ids)
    sel = loss_terms(ids, mask, loss_rows)
    n = int(sel.sum())
    if n == 0:
        raise RefError(f"loss_rows {list(loss_rows)}: no position t with h0 <= t < h0+R-1 and "
                       "mask 1 at t and t+1; widen loss_rows or fix the mask")
    return lp[sel].sum() / n, lp


def argmax_lowest(logits):
    """Argmax over the last axis; ties go to the lowest id."""
    V = logits.shape[-1]
    top = logits.max(-1, keepdim=True).values
    ar = torch.arange(V).expand_as(logits)
    return torch.where(logits == top, ar, torch.full_like(ar, V)).min(-1).values


@torch.no_grad()
def greedy(cfg, P, ids, mask, steps, rope_fp32=False, step_logits=None):
    """(B, steps) greedy continuation of each full row with a KV cache; appends each step's
    (B, V) logits to step_logits when given."""
    B, T = ids.shape
    cache = [None] * cfg.layers
    key_valid = mask.clone()
    logits = forward(cfg, P, ids, positions_of(mask), key_valid, cache, rope_fp32)
    nxt_pos = mask.sum(-1, keepdim=True)                       # positions continue after the last real token
    out = []
    for s in range(steps):
        if step_logits is not None:
            step_logits.append(logits[:, -1])
        tok = argmax_lowest(logits[:, -1])
        out.append(tok)
        if s + 1 == steps:
            break
        key_valid = torch.cat([key_valid, torch.ones(B, 1, dtype=key_valid.dtype)], dim=1)
        logits = forward(cfg, P, tok[:, None], nxt_pos, key_valid, cache, rope_fp32)
        nxt_pos = nxt_pos + 1
    return torch.stack(out, dim=1) if out else torch.zeros(B, 0, dtype=torch.long)


# ---------------------------------------------------------------- IO

def load_model(model_dir, dtype=torch.float64):
    cfg = load_config(model_dir)
    w = load_weights(model_dir)
    check_weights(cfg, w, model_dir)
    return cfg, {n: t.to(dtype) for n, t in w.items()}


def parse_request(req, cfg):
    if not isinstance(req, dict):
        raise RefError("IN.json: expected a JSON object")
    ids = req.get("ids")
    if (not isinstance(ids, list) or not ids or not all(isinstance(r, list) and r for r in ids)
            or len({len(r) for r in ids}) != 1):
        raise RefError("IN.json: 'ids' must be a non-empty list of equally long non-empty lists of token ids")
    flat = [x for r in ids for x in r]
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in flat):
        raise RefError("IN.json: 'ids' holds a non-integer")
    bad = [x for x in flat if not 0 <= x < cfg.vocab_size]
    if bad:
        raise RefError(f"IN.json: token id {bad[0]} outside [0, vocab_size {cfg.vocab_size})")
    B, T = len(ids), len(ids[0])
    mask = req.get("mask")
    if mask is None:
        mask = [[1] * T for _ in range(B)]
    if (not isinstance(mask, list) or len(mask) != B
            or not all(isinstance(r, list) and len(r) == T and all(m in (0, 1) for m in r) for r in mask)):
        raise RefError(f"IN.json: 'mask' must be {B} rows of {T} zeros/ones, like 'ids'")
    for b, r in enumerate(mask):
        if not any(r):
            raise RefError(f"IN.json: mask row {b} has no real token (all zeros)")
    want = req.get("want", ["logits"])
    known = {"logits", "logprobs", "greedy", "grads"}
    if not isinstance(want, list) or not set(want) <= known:
        raise RefError(f"IN.json: 'want' = {want!r}; choose from {sorted(known)}")
    steps = req.get("greedy_steps", 32)
    if not isinstance(steps, int) or steps < 0:
        raise RefError(f"IN.json: greedy_steps {steps!r} must be a non-negative integer")
    lr = req.get("loss_rows", [0, T])
    if (not isinstance(lr, list) or len(lr) != 2 or not all(isinstance(v, int) for v in lr)
            or lr[0] < 0 or lr[1] < 2 or lr[0] + lr[1] > T):
        raise RefError(f"IN.json: loss_rows {lr!r} must be [h0, R] with h0 >= 0, R >= 2, h0+R <= T={T}")
    dt = req.get("dtype", "float64")
    if dt not in ("float64", "float32"):
        raise RefError(f"IN.json: dtype {dt!r}; use 'float64' or 'float32'")
    fmt = req.get("out_format", "json")
    if fmt not in ("json", "bin"):
        raise RefError(f"IN.json: out_format {fmt!r}; use 'json' or 'bin'")
    return dict(ids=torch.tensor(ids, dtype=torch.long), mask=torch.tensor(mask, dtype=torch.long),
                want=want, steps=steps, loss_rows=tuple(lr), dtype=getattr(torch, dt),
                rope_fp32=bool(req.get("rope_fp32", False)), fmt=fmt)


class _Sink:
    """Places float arrays in OUT.json (nested lists) or in the .bin file (float64 LE), the
    latter streamed in chunks so large logits / gradients never sit in memory as Python floats."""

    CHUNK = 1 << 20

    def __init__(self, out_path, fmt):
        self.fmt = fmt
        stem = out_path[:-5] if out_path.endswith(".json") else out_path
        self.bin_path = stem + ".bin"
        self.off = 0
        self.file = open(self.bin_path, "wb") if fmt == "bin" else None

    def put(self, t):
        t = t.detach().to(torch.float64)
        if not bool(torch.isfinite(t).all()):
            raise RefError("non-finite values in the output; check the weights and inputs")
        if self.fmt == "json":
            return t.tolist()
        flat = t.flatten()
        for i in range(0, flat.numel(), self.CHUNK):
            self.file.write(array.array("d", flat[i:i + self.CHUNK].tolist()).tobytes())
        ref = {"file": os.path.basename(self.bin_path), "offset": self.off, "count": t.numel(),
               "shape": list(t.shape)}
        self.off += 8 * t.numel()
        return ref

    def close(self):
        if self.file:
            self.file.close()


def run(model_dir, in_path, out_path):
    with open(in_path) as f:
        try:
            req = json.load(f)
        except json.JSONDecodeError as e:
            raise RefError(f"{in_path}: not JSON ({e})") from None
    cfg = load_config(model_dir)
    r = parse_request(req, cfg)
    cfg, P = load_model(model_dir, r["dtype"])
    ids, mask = r["ids"], r["mask"]
    sink = _Sink(out_path, r["fmt"])
    out = {"dtype": str(r["dtype"]).replace("torch.", ""), "positions": positions_of(mask).tolist(),
           "inv_freq": rope_inv_freq(cfg, torch.float32 if r["rope_fp32"] else r["dtype"]).tolist()}
    want = r["want"]
    if "grads" in want:
        for t in P.values():
            t.requires_grad_(True)
    if {"logits", "logprobs", "grads"} & set(want):
        with torch.set_grad_enabled("grads" in want):
            logits = logits_of(cfg, P, ids, mask, r["rope_fp32"])
            if "logprobs" in want or "grads" in want:
                lp = next_logprobs(logits, ids)
                sel = loss_terms(ids, mask, r["loss_rows"])
                n = int(sel.sum())
                if n == 0:
                    raise RefError(f"loss_rows {list(r['loss_rows'])}: no position t with h0 <= t < h0+R-1 "
                                   "and mask 1 at t and t+1; widen loss_rows or fix the mask")
                loss = lp[sel].sum() / n
                out["loss"] = float(loss)
        if "logits" in want:
            out["logits"] = sink.put(logits)
        if "logprobs" in want:
            out["logprobs"] = sink.put(lp)
        if "grads" in want:
            grads = torch.autograd.grad(loss, list(P.values()))
            out["grads"] = {n: (sink.put(g.flatten()) if r["fmt"] == "json" else sink.put(g))
                            for n, g in zip(P, grads)}
            out["shapes"] = {n: list(t.shape) for n, t in P.items()}
            for t in P.values():
                t.requires_grad_(False)
    if "greedy" in want:
        out["greedy"] = greedy(cfg, {n: t.detach() for n, t in P.items()}, ids, mask,
                               r["steps"], r["rope_fp32"]).tolist()
    sink.close()
    with open(out_path, "w") as f:
        json.dump(out, f)


# ---------------------------------------------------------------- random folders

def make_random(args):
    """A tiny random model folder: config.json and model.safetensors (or shards + index)."""
    g = torch.Generator().manual_seed(args.seed)
    raw = {"model_type": args.arch,
           "architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                              "qwen3": "Qwen3ForCausalLM"}[args.arch]],
           "vocab_size": args.vocab, "hidden_size": args.hidden, "intermediate_size": args.intermediate,
           "num_hidden_layers": args.layers, "num_attention_heads": args.heads,
           "num_key_value_heads": args.kv_heads, "rms_norm_eps": args.eps, "hidden_act": "silu",
           "tie_word_embeddings": args.tied, "max_position_embeddings": 4096}
    if args.head_dim:
        raw["head_dim"] = args.head_dim
    if args.arch in ("llama", "qwen3"):
        raw["attention_bias"] = args.attention_bias
    if args.arch == "llama":
        raw["mlp_bias"] = args.mlp_bias
    rope = {"rope_type": args.rope_type}
    if args.rope_type == "linear":
        rope["factor"] = args.rope_factor
    elif args.rope_type == "llama3":
        rope.update(factor=args.rope_factor, low_freq_factor=1.0, high_freq_factor=4.0,
                    original_max_position_embeddings=args.rope_orig)
    if args.rope_spelling == "parameters":
        raw["rope_parameters"] = dict(rope, rope_theta=args.rope_theta)
    else:
        raw["rope_theta"] = args.rope_theta
        if args.rope_type == "default":
            raw["rope_scaling"] = None
        else:
            if args.rope_spelling == "type":
                rope["type"] = rope.pop("rope_type")
            raw["rope_scaling"] = rope
    cfg = Config(raw)
    tensors = {}
    for name, shape in expected_shapes(cfg).items():
        if name.endswith("norm.weight"):
            t = 1.0 + 0.2 * torch.randn(shape, generator=g, dtype=torch.float64)
        elif name.endswith(".bias"):
            t = 0.1 * torch.randn(shape, generator=g, dtype=torch.float64)
        else:
            fan_in = shape[-1] if "embed" not in name else 1
            t = torch.randn(shape, generator=g, dtype=torch.float64) * (args.init_scale / math.sqrt(fan_in))
        tensors[name] = t.float()
    os.makedirs(args.make_random, exist_ok=True)
    with open(os.path.join(args.make_random, "config.json"), "w") as f:
        json.dump(raw, f, indent=2)
    for old in os.listdir(args.make_random):
        if old.startswith("model") and (old.endswith(".safetensors") or old.endswith(".index.json")):
            os.remove(os.path.join(args.make_random, old))
    if args.shards <= 1:
        write_safetensors(os.path.join(args.make_random, "model.safetensors"), tensors, args.dtype)
        return
    names = list(tensors)
    wmap = {}
    for s in range(args.shards):
        fn = f"model-{s + 1:05d}-of-{args.shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s::args.shards]}
        write_safetensors(os.path.join(args.make_random, fn), part, args.dtype)
        wmap.update({n: fn for n in part})
    with open(os.path.join(args.make_random, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wmap}, f, indent=2)


def main(argv):
    if argv and argv[0] == "--make-random":
        ap = argparse.ArgumentParser(prog="llama_reference.py --make-random")
        ap.add_argument("--make-random", required=True, metavar="MODEL_DIR")
        ap.add_argument("--arch", required=True, choices=["llama", "qwen2", "qwen3"])
        ap.add_argument("--seed", type=int, required=True)
        ap.add_argument("--tied", action="store_true")
        ap.add_argument("--vocab", type=int, default=61)
        ap.add_argument("--hidden", type=int, default=24)
        ap.add_argument("--intermediate", type=int, default=40)
        ap.add_argument("--layers", type=int, default=2)
        ap.add_argument("--heads", type=int, default=4)
        ap.add_argument("--kv-heads", type=int, default=2)
        ap.add_argument("--head-dim", type=int, default=0, help="0: hidden/heads, not written")
        ap.add_argument("--eps", type=float, default=1e-6)
        ap.add_argument("--rope-type", default="default", choices=["default", "linear", "llama3"])
        ap.add_argument("--rope-theta", type=float, default=10000.0)
        ap.add_argument("--rope-factor", type=float, default=8.0)
        ap.add_argument("--rope-orig", type=float, default=64.0, help="llama3 original_max_position_embeddings")
        ap.add_argument("--rope-spelling", default="scaling", choices=["scaling", "type", "parameters"],
                        help="rope_scaling with rope_type / with type / rope_parameters")
        ap.add_argument("--attention-bias", action="store_true")
        ap.add_argument("--mlp-bias", action="store_true")
        ap.add_argument("--init-scale", type=float, default=1.0)
        ap.add_argument("--dtype", default="F32", choices=["F32", "BF16", "F16"])
        ap.add_argument("--shards", type=int, default=1)
        make_random(ap.parse_args(argv))
        return 0
    if len(argv) != 3:
        sys.stderr.write("usage: llama_reference.py MODEL_DIR IN.json OUT.json\n"
                         "       llama_reference.py --make-random MODEL_DIR --arch {llama,qwen2,qwen3} "
                         "--seed N [--tied] [...]\n")
        return 2
    run(*argv)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except RefError as e:
        sys.stderr.write(f"llama_reference: error: {e}\n")
        sys.exit(2)
