"""An independent numpy forward pass of llama / qwen2 GGUF models.

Weights are read and dequantized by the `gguf` package (llama.cpp's own Python
reader), not by tandem, and the maths is written here from the model
definitions (Hugging Face layout: llama q/k rows are un-permuted back from
GGUF's interleaved order and rotated NeoX-style), so agreement with tandem
checks tandem's loader, quant formats and forward pass against code nobody on
this project wrote. Computation is float64.
"""
import numpy as np
import gguf


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def _unpermute(w, n_head):
    # Inverse of llama.cpp's convert_hf_to_gguf permute():
    # w.reshape(n_head, 2, r // n_head // 2, *rest).swapaxes(1, 2).reshape(w.shape)
    rows = w.shape[0]
    rest = w.shape[1:]
    return (w.reshape(n_head, rows // n_head // 2, 2, *rest)
             .swapaxes(1, 2).reshape(w.shape))


class ReferenceModel:
    def __init__(self, path):
        r = gguf.GGUFReader(path)
        self.arch = _field(r, "general.architecture")
        if self.arch not in ("llama", "qwen2"):
            raise ValueError(f"{path}: architecture {self.arch} not supported by the reference")
        a = self.arch + "."
        self.n_layers = int(_field(r, a + "block_count"))
        self.d = int(_field(r, a + "embedding_length"))
        self.n_heads = int(_field(r, a + "attention.head_count"))
        self.n_kv = int(_field(r, a + "attention.head_count_kv", self.n_heads))
        self.hd = int(_field(r, a + "attention.key_length", self.d // self.n_heads))
        self.eps = float(_field(r, a + "attention.layer_norm_rms_epsilon"))
        self.theta = float(_field(r, a + "rope.freq_base", 10000.0))
        t = {}
        for tensor in r.tensors:
            w = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
            shape = tuple(int(x) for x in reversed(tensor.shape))
            t[tensor.name] = np.asarray(w, dtype=np.float64).reshape(shape)
        self.t = t
        if self.arch == "llama":
            for i in range(self.n_layers):
                t[f"blk.{i}.attn_q.weight"] = _unpermute(t[f"blk.{i}.attn_q.weight"], self.n_heads)
                t[f"blk.{i}.attn_k.weight"] = _unpermute(t[f"blk.{i}.attn_k.weight"], self.n_kv)
        self.output = t.get("output.weight", t["token_embd.weight"])
        self.vocab = self.output.shape[0]
        inv = self.theta ** (-np.arange(0, self.hd, 2, dtype=np.float64) / self.hd)
        if "rope_freqs.weight" in t:
            inv = inv / t["rope_freqs.weight"].reshape(-1)
        self.inv_freq = inv

    def _rmsnorm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def _rope(self, x, positions):
        # x: (n, heads, hd), NeoX style: pairs (i, i + hd/2).
        ang = positions[:, None].astype(np.float64) * self.inv_freq[None, :]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        h = self.hd // 2
        x0, x1 = x[..., :h], x[..., h:]
        return np.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1)

    def new_cache(self):
        return [{"k": np.zeros((0, self.n_kv, self.hd)), "v": np.zeros((0, self.n_kv, self.hd))}
                for _ in range(self.n_layers)]

    def forward(self, ids, cache):
        """Logits (len(ids), vocab) for ids appended after what `cache` holds."""
        t = self.t
        start = cache[0]["k"].shape[0]
        n = len(ids)
        pos = np.arange(start, start + n)
        x = t["token_embd.weight"][np.asarray(ids)]
        group = self.n_heads // self.n_kv
        for i in range(self.n_layers):
            p = f"blk.{i}."
            h = self._rmsnorm(x, t[p + "attn_norm.weight"])
            q = h @ t[p + "attn_q.weight"].T
            k = h @ t[p + "attn_k.weight"].T
            v = h @ t[p + "attn_v.weight"].T
            if p + "attn_q.bias" in t:
                q, k, v = q + t[p + "attn_q.bias"], k + t[p + "attn_k.bias"], v + t[p + "attn_v.bias"]
            q = self._rope(q.reshape(n, self.n_heads, self.hd), pos)
            k = self._rope(k.reshape(n, self.n_kv, self.hd), pos)
            v = v.reshape(n, self.n_kv, self.hd)
            cache[i]["k"] = np.concatenate([cache[i]["k"], k])
            cache[i]["v"] = np.concatenate([cache[i]["v"], v])
            K, V = cache[i]["k"], cache[i]["v"]
            total = K.shape[0]
            out = np.empty((n, self.n_heads, self.hd))
            mask = pos[:, None] >= np.arange(total)[None, :]
            for hh in range(self.n_heads):
                kh = K[:, hh // group, :]
                vh = V[:, hh // group, :]
                s = (q[:, hh, :] @ kh.T) / np.sqrt(self.hd)
                s = np.where(mask, s, -np.inf)
                s = np.exp(s - s.max(axis=1, keepdims=True))
                s /= s.sum(axis=1, keepdims=True)
                out[:, hh, :] = s @ vh
            x = x + out.reshape(n, -1) @ t[p + "attn_output.weight"].T
            h = self._rmsnorm(x, t[p + "ffn_norm.weight"])
            g = h @ t[p + "ffn_gate.weight"].T
            u = h @ t[p + "ffn_up.weight"].T
            x = x + ((g / (1.0 + np.exp(-g))) * u) @ t[p + "ffn_down.weight"].T
        x = self._rmsnorm(x, t["output_norm.weight"])
        return x @ self.output.T

    def greedy(self, ids, n_new):
        cache = self.new_cache()
        logits = self.forward(ids, cache)
        out, margins = [], []
        for _ in range(n_new):
            last = logits[-1]
            top2 = np.sort(last)[-2:]
            margins.append(float(top2[1] - top2[0]))
            tok = int(np.argmax(last))
            out.append(tok)
            logits = self.forward([tok], cache)
        return out, margins
