#!/usr/bin/python3
"""An independent float64 reference for PEFT adapters in Hugging Face order.

It rebuilds the Hugging Face view of a GGUF llama/qwen2/phi3 model (for arch
llama the rows of q/k are put back from GGUF order, undoing llama.cpp's
conversion permutation; phi3 keeps its fused modules: attn_qkv is
transformers' qkv_proj and ffn_up its gate_up_proj, rows unchanged, so a
PEFT pair on a fused module is added to the whole fused weight before it is
split), applies PEFT adapters exactly as PEFT does (W + scaling * B @ A
with lora_B in the folder's own, Hugging Face, row order; for DoRA, use_dora,
each row of that then scaled to lora_magnitude_vector / its L2 norm, PEFT's
merged weight) and runs the model
with Hugging Face's rotate-half RoPE (phi3 LongRoPE: each frequency divided
by its rope_factors_{short,long} entry, long when the sequence is longer than
the original context, as transformers picks; cos and sin times attn_factor). If wisp's GGUF-order handling of q/k
LoRA rows were wrong, its logits would not match these.

A prompt-tuning adapter (--prompt PEFT_DIR, peft_type PROMPT_TUNING) is run
as PEFT runs it: its prompt_embeddings rows are put before the input
embeddings (BOS included), the text's positions start after them, and only
the text's logits are returned.

A prefix-tuning adapter (--prefix PEFT_DIR, peft_type PREFIX_TUNING) is run
as PEFT hands it to transformers: prompt_embeddings [N, num_layers*2*token_dim]
viewed as [N, num_layers*2, num_attention_heads, head_dim] and permuted to
past_key_values (layer l's keys at 2l, values at 2l+1; for grouped-query
attention the heads are the kv heads), a cache of N past positions whose keys
are used as stored (no RoPE: transformers rotates only the new keys), the
text's positions starting at N, its queries seeing every prefix position.

usage: /usr/bin/python3 peft_reference.py BASE.gguf CASES.json [--lora PEFT_DIR[:SCALE]]... [--prompt PEFT_DIR]
       [--prefix PEFT_DIR]
       [--naive] > OUT.json
       /usr/bin/python3 peft_reference.py BASE.gguf --check-merged MERGED.gguf [--lora PEFT_DIR[:SCALE]]...
--check-merged compares every projection of MERGED.gguf (an F32 model with the
adapters merged, e.g. by `wisp merge`) with W + scaling * B @ A computed here
in float64, both in Hugging Face's view; it prints the largest difference and
fails above 1e-5.
--naive applies the adapters' q/k lora_B rows as if they were already in the
model's GGUF order (what a converter that forgot the permutation would do):
a negative control showing that the row order matters.
CASES.json is any file in the schema of ../shared/golden/logits (its prompts and
tokens are used); the output has the same schema. Test-only (numpy)."""
import json
import math
import os
import re
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_reader import Reader  # noqa: E402

PROJ = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj"}
# phi3's fused tensors: GGUF name -> (transformers module, the projections of its rows in order)
PHI3_FUSED = {"attn_qkv": ("self_attn.qkv_proj", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
              "ffn_up": ("mlp.gate_up_proj", ("mlp.gate_proj", "mlp.up_proj"))}
ST_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}


def read_safetensors(path):
    buf = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", buf, 0)
    header = json.loads(buf[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        if info["dtype"] == "BF16":
            raw = np.frombuffer(buf, np.uint16, (end - begin) // 2, base + begin).astype(np.uint32) << 16
            arr = raw.view(np.float32)
        else:
            arr = np.frombuffer(buf, ST_DTYPES[info["dtype"]], offset=base + begin,
                                count=(end - begin) // np.dtype(ST_DTYPES[info["dtype"]]).itemsize)
        out[name] = arr.astype(np.float64).reshape(info["shape"])
    return out


def pattern_value(patterns, module, default):
    """PEFT's rule: the first key P with re.match(rf"(.*\\.)?({P})$", module)."""
    for key, value in (patterns or {}).items():
        if re.match(rf"(.*\.)?({key})$", module):
            return value
    return default


def load_peft(folder, scale):
    cfg = json.load(open(os.path.join(folder, "adapter_config.json")))
    tensors = read_safetensors(os.path.join(folder, "adapter_model.safetensors"))
    deltas = {}
    for name, a in tensors.items():
        m = re.fullmatch(r"(?:base_model\.model\.)?(model\.layers\.(\d+)\.(\w+\.\w+))\.lora_A\.weight", name)
        if not m:
            continue
        module, layer, proj = m.group(1), int(m.group(2)), m.group(3)
        b = tensors[name.replace("lora_A", "lora_B")]
        r = pattern_value(cfg.get("rank_pattern"), module, cfg.get("r", 8))
        alpha = pattern_value(cfg.get("alpha_pattern"), module, cfg.get("lora_alpha", 8))
        assert r == a.shape[0], f"{module}: rank {a.shape[0]} vs config {r}"
        scaling = alpha / (math.sqrt(r) if cfg.get("use_rslora") else r)
        # DoRA: PEFT saves the magnitude as "<module>.lora_magnitude_vector" (Hugging Face row order)
        mag = tensors.get(name.replace("lora_A.weight", "lora_magnitude_vector"))
        assert (mag is not None) == bool(cfg.get("use_dora")), f"{module}: magnitude vs use_dora"
        deltas[(layer, proj)] = (scale * scaling, b, a, mag)
    return deltas


def unpermute(w, n_head):
    """GGUF (llama.cpp) row order -> Hugging Face order for q/k of arch llama."""
    out_dim = w.shape[0]
    return w.reshape(n_head, out_dim // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


class Model:
    def __init__(self, path, adapters, naive=False, prompt=None, prefix=None):
        g = Reader(path)
        self.prompt = prompt
        arch = g.meta["general.architecture"]
        self.arch = arch
        self.n_layer = g.meta[f"{arch}.block_count"]
        self.n_head = g.meta[f"{arch}.attention.head_count"]
        self.n_kv = g.meta.get(f"{arch}.attention.head_count_kv", self.n_head)
        self.eps = g.meta.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)
        self.base = g.meta.get(f"{arch}.rope.freq_base", 10000.0)
        self.embd = g.tensor("token_embd.weight")
        self.out = g.tensor("output.weight") if "output.weight" in g.tensors else self.embd
        self.out_norm = g.tensor("output_norm.weight")
        self.head_dim = self.embd.shape[1] // self.n_head
        self.factors = {}
        for which in ("short", "long"):
            if f"rope_factors_{which}.weight" in g.tensors:
                self.factors[which] = g.tensor(f"rope_factors_{which}.weight").astype(np.float64)
        self.orig_ctx = g.meta.get(f"{arch}.rope.scaling.original_context_length", 0)
        self.attn_factor = g.meta.get(f"{arch}.rope.scaling.attn_factor", 1.0)
        fused = PHI3_FUSED if arch == "phi3" else {}
        self.layers = []
        for i in range(self.n_layer):
            L = {"attn_norm": g.tensor(f"blk.{i}.attn_norm.weight"), "ffn_norm": g.tensor(f"blk.{i}.ffn_norm.weight")}
            for gname, (hname, parts) in fused.items():
                w = g.tensor(f"blk.{i}.{gname}.weight")
                for d in adapters:
                    if (i, hname) in d:
                        s, b, a, mag = d[(i, hname)]
                        w = w + s * (b @ a)
                        if mag is not None:  # DoRA: per-row norms, so the fused rows as one weight
                            w = (mag / np.linalg.norm(w, axis=1))[:, None] * w
                sizes = [self.n_head * self.head_dim if p == "self_attn.q_proj" else
                         self.n_kv * self.head_dim if p in ("self_attn.k_proj", "self_attn.v_proj") else
                         w.shape[0] // 2 for p in parts]
                assert sum(sizes) == w.shape[0], f"{gname}: {w.shape[0]} rows vs {sizes}"
                for p, piece in zip(parts, np.split(w, np.cumsum(sizes)[:-1])):
                    L[p] = piece
            for gname, hname in PROJ.items():
                if hname in L:
                    continue
                w = g.tensor(f"blk.{i}.{gname}.weight")
                if arch == "llama" and gname in ("attn_q", "attn_k"):
                    w = unpermute(w, self.n_head if gname == "attn_q" else self.n_kv)
                for d in adapters:
                    if (i, hname) in d:
                        s, b, a, mag = d[(i, hname)]
                        if naive and arch == "llama" and gname in ("attn_q", "attn_k"):
                            # rows taken as GGUF order: in HF order they land permuted the other way
                            b = unpermute(b, self.n_head if gname == "attn_q" else self.n_kv)
                            if mag is not None:
                                mag = unpermute(mag, self.n_head if gname == "attn_q" else self.n_kv)
                        w = w + s * (b @ a)
                        if mag is not None:  # DoRA: each row rescaled to the learned magnitude
                            w = (mag / np.linalg.norm(w, axis=1))[:, None] * w
                L[hname] = w
            for b in ("attn_q", "attn_k", "attn_v"):
                name = f"blk.{i}.{b}.bias"
                L[b + ".bias"] = g.tensor(name) if name in g.tensors else 0.0
            self.layers.append(L)
        self.prefix = None
        if prefix is not None:  # [N, layers*2, heads, hd] -> per layer (keys, values) [heads, N, hd]
            cfg, rows = prefix
            hd = cfg["token_dim"] // cfg["num_attention_heads"]
            if (cfg["num_layers"], cfg["num_attention_heads"], hd) != (self.n_layer, self.n_kv, self.head_dim):
                sys.exit("the prefix does not fit the model (layers, kv heads, head_dim)")
            kv = rows.reshape(rows.shape[0], self.n_layer * 2, self.n_kv, hd).transpose(1, 2, 0, 3)
            self.prefix = [(kv[2 * i], kv[2 * i + 1]) for i in range(self.n_layer)]

    def rms(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):
        """Hugging Face's rotate_half: pairs (i, i + d/2)."""
        d = self.head_dim
        inv = self.base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        if self.factors:
            inv = inv / self.factors["long" if len(pos) > self.orig_ctx else "short"]
        ang = np.outer(pos, inv)
        cos = np.concatenate([np.cos(ang), np.cos(ang)], axis=-1)[:, None, :] * self.attn_factor
        sin = np.concatenate([np.sin(ang), np.sin(ang)], axis=-1)[:, None, :] * self.attn_factor
        rot = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
        return x * cos + rot * sin

    def forward(self, tokens):
        x = self.embd[tokens]
        n_prompt = 0
        if self.prompt is not None:  # PEFT PROMPT_TUNING: virtual tokens first, at positions 0..n_prompt-1
            n_prompt = self.prompt.shape[0]
            x = np.concatenate([self.prompt, x], axis=0)
        n, hd = x.shape[0], self.head_dim
        P = self.prefix[0][0].shape[1] if self.prefix else 0  # past positions before the text
        pos = np.arange(P, P + n, dtype=np.float64)
        mask = np.concatenate([np.zeros((n, P)), np.triu(np.full((n, n), -np.inf), 1)], axis=1)
        group = self.n_head // self.n_kv
        for li, L in enumerate(self.layers):
            h = self.rms(x, L["attn_norm"])
            q = (h @ L["self_attn.q_proj"].T + L["attn_q.bias"]).reshape(n, self.n_head, hd)
            k = (h @ L["self_attn.k_proj"].T + L["attn_k.bias"]).reshape(n, self.n_kv, hd)
            v = (h @ L["self_attn.v_proj"].T + L["attn_v.bias"]).reshape(n, self.n_kv, hd)
            q, k = self.rope(q, pos), self.rope(k, pos)
            att = np.empty((n, self.n_head, hd))
            for hh in range(self.n_head):
                kv = hh // group
                keys, vals = k[:, kv, :], v[:, kv, :]
                if P:
                    keys = np.concatenate([self.prefix[li][0][kv], keys], axis=0)
                    vals = np.concatenate([self.prefix[li][1][kv], vals], axis=0)
                s = q[:, hh, :] @ keys.T / math.sqrt(hd) + mask
                p = np.exp(s - s.max(axis=-1, keepdims=True))
                p /= p.sum(axis=-1, keepdims=True)
                att[:, hh, :] = p @ vals
            x = x + att.reshape(n, -1) @ L["self_attn.o_proj"].T
            h = self.rms(x, L["ffn_norm"])
            gate = h @ L["mlp.gate_proj"].T
            x = x + ((gate / (1 + np.exp(-gate))) * (h @ L["mlp.up_proj"].T)) @ L["mlp.down_proj"].T
        return (self.rms(x, self.out_norm) @ self.out.T)[n_prompt:]


def load_prompt(folder):
    cfg = json.load(open(os.path.join(folder, "adapter_config.json")))
    if cfg.get("peft_type") != "PROMPT_TUNING" or cfg.get("num_transformer_submodules", 1) != 1:
        sys.exit(f"{folder}: not a decoder-only PROMPT_TUNING adapter")
    rows = read_safetensors(os.path.join(folder, "adapter_model.safetensors"))["prompt_embeddings"]
    if rows.shape != (cfg["num_virtual_tokens"], cfg["token_dim"]):
        sys.exit(f"{folder}: prompt_embeddings has shape {rows.shape}")
    return rows.astype(np.float64)


def load_prefix(folder):
    cfg = json.load(open(os.path.join(folder, "adapter_config.json")))
    if cfg.get("peft_type") != "PREFIX_TUNING" or cfg.get("num_transformer_submodules", 1) != 1:
        sys.exit(f"{folder}: not a decoder-only PREFIX_TUNING adapter")
    rows = read_safetensors(os.path.join(folder, "adapter_model.safetensors"))["prompt_embeddings"]
    if rows.shape != (cfg["num_virtual_tokens"], cfg["num_layers"] * 2 * cfg["token_dim"]):
        sys.exit(f"{folder}: prompt_embeddings has shape {rows.shape}")
    return cfg, rows.astype(np.float64)


def check_merged(want, got):
    worst, n = 0.0, 0
    for i, (lw, lg) in enumerate(zip(want.layers, got.layers)):
        for hname in PROJ.values():
            d = float(np.max(np.abs(lw[hname] - lg[hname])))
            n += 1
            if d > worst:
                worst, where = d, f"layer {i} {hname}"
    print(f"merged weights: {n} projections, largest |difference| {worst:.3g} ({where})")
    if worst > 1e-5:
        sys.exit("merged weights differ from W + scaling * B @ A by more than 1e-5")


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    model_path, cases_path, rest = args[0], args[1], args[2:]
    merged = None
    if cases_path == "--check-merged" and rest:
        merged, rest = rest[0], rest[1:]
    naive = "--naive" in rest
    rest = [r for r in rest if r != "--naive"]
    adapters, prompt, prefix = [], None, None
    while rest:
        if rest[0] == "--prompt" and len(rest) >= 2:
            prompt = load_prompt(rest[1])
            rest = rest[2:]
            continue
        if rest[0] == "--prefix" and len(rest) >= 2:
            prefix = load_prefix(rest[1])
            rest = rest[2:]
            continue
        if rest[0] != "--lora" or len(rest) < 2:
            sys.exit(f"unexpected argument {rest[0]}")
        spec = rest[1]
        folder, scale = spec, 1.0
        if ":" in spec and re.fullmatch(r"-?[0-9.eE+-]+", spec.rsplit(":", 1)[1]):
            folder, scale = spec.rsplit(":", 1)[0], float(spec.rsplit(":", 1)[1])
        adapters.append(load_peft(folder, scale))
        rest = rest[2:]
    model = Model(model_path, adapters, naive, prompt, prefix)
    if merged is not None:
        return check_merged(model, Model(merged, []))
    cases = json.load(open(cases_path))
    out = {"model": os.path.basename(model_path), "n_vocab": int(model.embd.shape[0]), "cases": []}
    for c in cases["cases"]:
        tokens = list(c["tokens"])
        logits = model.forward(np.array(tokens))
        seq, greedy = list(tokens), []
        last = logits[-1]
        for _ in range(32):
            greedy.append(int(np.argmax(last)))
            seq.append(greedy[-1])
            if len(greedy) < 32:
                last = model.forward(np.array(seq))[-1]
        out["cases"].append({"prompt": c["prompt"], "tokens": tokens, "logits": logits.tolist(), "greedy": greedy})
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
