#!/usr/bin/python3
"""PyTorch reference for the LoRA training benchmark (bench-only code).

Loads a llama-family GGUF (F32/F16/Q8_0 tensors, dequantized to float32 as
PyTorch needs), builds the same model (RMSNorm, llama.cpp's adjacent-pair
RoPE, GQA attention, SwiGLU, tied or untied output), puts PEFT-style LoRA
(A kaiming-uniform, B zero, scale alpha/r) on the chosen projections with the
base frozen, and times AdamW steps of causal-LM cross-entropy on random
tokens. Prints one JSON line: tokens/s (steps after the first) and peak RSS.

usage: train_torch.py MODEL.gguf [--ctx 256] [--batch 1] [--rank 8] [--steps 3] [--threads 2]
"""
import argparse
import json
import math
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def read_gguf(path):
    data = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n].decode("utf-8", "replace")
        pos += n
        return s

    def value(t):
        if t in GGUF_SCALARS:
            return take(GGUF_SCALARS[t])
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        raise ValueError("unknown GGUF value type %d" % t)

    assert data[:4] == b"GGUF", "not a GGUF file"
    pos = 4
    take("I")
    n_tensors, n_kv = take("Q"), take("Q")
    meta = {}
    for _ in range(n_kv):
        key = string()
        meta[key] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        nd = take("I")
        ne = [take("Q") for _ in range(nd)]
        infos.append((name, ne, take("I"), take("Q")))
    align = meta.get("general.alignment", 32)
    base = (pos + align - 1) // align * align
    tensors = {}
    for name, ne, typ, off in infos:
        count = int(np.prod(ne))
        start = base + off
        if typ == 0:
            arr = np.frombuffer(data, np.float32, count, start)
        elif typ == 1:
            arr = np.frombuffer(data, np.float16, count, start).astype(np.float32)
        elif typ == 8:  # Q8_0: fp16 scale + 32 int8 per block
            blocks = np.frombuffer(data, np.uint8, count // 32 * 34, start).reshape(-1, 34)
            d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
            q = blocks[:, 2:].copy().view(np.int8).astype(np.float32)
            arr = (q * d).reshape(-1)
        else:
            raise ValueError("%s: tensor type %d not supported by this reference" % (name, typ))
        tensors[name] = torch.from_numpy(arr.reshape(list(reversed(ne))).copy())
    return meta, tensors


class LoRALinear(torch.nn.Module):
    def __init__(self, weight, rank, alpha):
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        n_out, n_in = weight.shape
        self.a = torch.nn.Parameter(torch.empty(rank, n_in))
        self.b = torch.nn.Parameter(torch.zeros(n_out, rank))
        torch.nn.init.kaiming_uniform_(self.a, a=math.sqrt(5))
        self.scale = alpha / rank

    def forward(self, x):
        return F.linear(x, self.weight) + self.scale * F.linear(F.linear(x, self.a), self.b)


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, cos, sin):  # adjacent pairs (2i, 2i+1), as llama.cpp for arch llama
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


class Model(torch.nn.Module):
    def __init__(self, meta, t, rank, alpha):
        super().__init__()
        arch = meta["general.architecture"]
        g = lambda k: meta["%s.%s" % (arch, k)]
        self.n_layers, self.n_heads, self.n_kv = g("block_count"), g("attention.head_count"), g("attention.head_count_kv")
        self.eps = g("attention.layer_norm_rms_epsilon")
        self.theta = meta.get("%s.rope.freq_base" % arch, 10000.0)
        self.embd = t["token_embd.weight"]
        self.out = t.get("output.weight", self.embd)
        self.out_norm = t["output_norm.weight"]
        self.layers = torch.nn.ModuleList()
        for i in range(self.n_layers):
            p = lambda n: t["blk.%d.%s.weight" % (i, n)]
            m = torch.nn.Module()
            for n in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"):
                setattr(m, n, LoRALinear(p(n), rank, alpha))
            m.attn_norm, m.ffn_norm = p("attn_norm"), p("ffn_norm")
            self.layers.append(m)

    def forward(self, tokens):
        B, T = tokens.shape
        x = self.embd[tokens]
        hd = x.shape[-1] // self.n_heads
        freq = self.theta ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)
        ang = torch.arange(T, dtype=torch.float32)[:, None] * freq[None, :]
        cos, sin = torch.cos(ang), torch.sin(ang)
        for m in self.layers:
            h = rms_norm(x, m.attn_norm, self.eps)
            q = rope(m.attn_q(h).view(B, T, self.n_heads, hd).transpose(1, 2), cos, sin)
            k = rope(m.attn_k(h).view(B, T, self.n_kv, hd).transpose(1, 2), cos, sin)
            v = m.attn_v(h).view(B, T, self.n_kv, hd).transpose(1, 2)
            rep = self.n_heads // self.n_kv
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
            s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
            a = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, -1)
            x = x + m.attn_output(a)
            h = rms_norm(x, m.ffn_norm, self.eps)
            x = x + m.ffn_down(F.silu(m.ffn_gate(h)) * m.ffn_up(h))
        return F.linear(rms_norm(x, self.out_norm, self.eps), self.out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    o = ap.parse_args()
    torch.set_num_threads(o.threads)
    torch.manual_seed(0)
    meta, tensors = read_gguf(o.model)
    model = Model(meta, tensors, o.rank, o.alpha)
    del tensors
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0)
    vocab = model.embd.shape[0]
    times = []
    for step in range(o.steps):
        tok = torch.randint(0, vocab, (o.batch, o.ctx + 1))
        t0 = time.time()
        logits = model(tok[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), tok[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.time() - t0)
        print("torch step %d: loss %.4f, %.2f s" % (step + 1, loss.item(), times[-1]), file=sys.stderr)
    steady = times[1:] if len(times) > 1 else times
    tok_s = o.ctx * o.batch * len(steady) / sum(steady)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"impl": "pytorch %s" % torch.__version__, "threads": o.threads, "ctx": o.ctx, "batch": o.batch,
                      "rank": o.rank, "trainable": sum(p.numel() for p in params), "tokens_per_s": tok_s,
                      "peak_rss_bytes": rss, "step_seconds": times}))


if __name__ == "__main__":
    main()
