"""tandem's logits and greedy tokens against the independent numpy reference.

Models: synthetic llama and qwen2 GGUFs written here by the `gguf` package's own
writer and quantizers (so tandem also reads files it did not write), in every
weight type gguf-py can quantize, and the real SmolLM2-135M-Instruct (Q4_1 +
Q8_0). For each: the logits of a 32-token prompt, and 32 greedy tokens.

Each model is checked twice: with tandem's scalar reference kernels
(TANDEM_KERNELS=ref: float32 arithmetic on the dequantized weights) and with the
fast SIMD kernels that run by default.

Tolerances, as a fraction of the largest logit magnitude:
- reference kernels, F32 KV cache: 2e-3. tandem computes in float32 (the
  reference in float64) from the same dequantized weights; float32 rounding in
  dot products of a few thousand terms, compounded over 30 layers, moves logits
  by ~1e-4 relative: an order of magnitude of headroom;
- F16 KV cache (K and V rounded to 11 significant bits): 2e-2;
- SIMD kernels: 1e-1. For quantized weights they quantize the activations to
  int8 in blocks of 32 (as llama.cpp does): each activation moves by up to 1/254
  of its block's largest magnitude. That is ~0.3% relative per matmul on the
  synthetic models (measured ~1% of the logit scale at the end), but SmolLM2 has
  outlier channels whose magnitude sets the block scale, and its logits move by
  ~6% of their scale (measured 1.8 on a largest logit of 32).
Greedy tokens: with the reference kernels they must be identical for all 32
steps. With the SIMD kernels they must be identical until the reference itself
is nearly tied: a divergence is accepted only at a step where the reference's
top-2 margin is below the SIMD tolerance (the two computations legitimately
pick different sides of a near-tie, and then continue different texts).
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import gguf

sys.path.insert(0, str(Path(__file__).parent))
from reference_model import ReferenceModel  # noqa: E402

TANDEM = os.environ.get("TANDEM_BIN", "build/tandem")
CACHE = Path(os.environ.get("TANDEM_CACHE", Path.home() / ".cache" / "tandem"))
failures = []


def run(*args, kernels=None):
    env = dict(os.environ)
    if kernels:
        env["TANDEM_KERNELS"] = kernels
    r = subprocess.run([TANDEM, *map(str, args)], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"tandem {' '.join(map(str, args))} failed: {r.stderr.strip()}")
    return r.stdout


def tandem_logits(model, ids, vocab, kv_type, tmp, kernels):
    out = Path(tmp) / "logits.f32"
    run("logits", "-m", model, "--ids", ",".join(map(str, ids)), "-o", out, "--kv-type", kv_type,
        kernels=kernels)
    return np.fromfile(out, dtype=np.float32).reshape(len(ids), vocab)


def tandem_greedy(model, ids, n, kv_type, kernels):
    out = run("generate", "-m", model, "--ids", ",".join(map(str, ids)), "-n", n, "--json",
              "--ignore-eos", "--kv-type", kv_type, kernels=kernels)
    return json.loads(out.strip().splitlines()[-1])["tokens"]


def check_model(label, path, ids, tmp, n_greedy=32):
    ref = ReferenceModel(path)
    want = ref.forward(ids, ref.new_cache())
    scale = float(np.abs(want).max())
    simd_tol = 1e-1
    for kernels, kv_type, rel_tol in (("ref", "f32", 2e-3), ("ref", "f16", 2e-2),
                                      ("simd", "f32", simd_tol)):
        got = tandem_logits(path, ids, ref.vocab, kv_type, tmp, kernels)
        err = float(np.abs(got - want).max())
        status = "ok" if err <= rel_tol * scale else "FAIL"
        print(f"{label}: logits kernels={kernels} kv={kv_type} max|diff| {err:.3g} (tolerance "
              f"{rel_tol * scale:.3g}, max|logit| {scale:.3g}) {status}", flush=True)
        if status != "ok":
            failures.append(f"{label} logits kernels={kernels} kv={kv_type}")
    ref_tokens, margins = ref.greedy(ids, n_greedy)
    for kernels in ("ref", "simd"):
        got_tokens = tandem_greedy(path, ids, n_greedy, "f32", kernels)
        if got_tokens != ref_tokens:
            i = next(i for i, (a, b) in enumerate(zip(got_tokens, ref_tokens)) if a != b)
            near_tie = kernels == "simd" and margins[i] < simd_tol * scale
            print(f"{label}: kernels={kernels}: greedy tokens differ at step {i}: tandem "
                  f"{got_tokens[i]}, reference {ref_tokens[i]} (reference top-2 margin "
                  f"{margins[i]:.3g}{', a near-tie: accepted' if near_tie else ''})", flush=True)
            if not near_tie:
                failures.append(f"{label} greedy kernels={kernels}")
        else:
            print(f"{label}: kernels={kernels}: {n_greedy} greedy tokens identical (smallest "
                  f"top-2 margin {min(margins):.3g})", flush=True)


def permute(w, n_head):
    # llama.cpp's convert_hf_to_gguf permute(): HF q/k rows -> GGUF interleaved order.
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
             .swapaxes(1, 2).reshape(w.shape))


def write_synthetic(path, arch, qtype, seed):
    rng = np.random.default_rng(seed)
    d, ff, n_layers, n_heads, n_kv, vocab = 64, 128, 2, 4, 2, 256
    hd = d // n_heads
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(n_layers)
    w.add_context_length(256)
    w.add_embedding_length(d)
    w.add_feed_forward_length(ff)
    w.add_head_count(n_heads)
    w.add_head_count_kv(n_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(vocab)

    def mat(rows, cols):
        return rng.normal(0, 1 / np.sqrt(cols), (rows, cols)).astype(np.float32)

    def add(name, a, quantize=True):
        if quantize and qtype not in (gguf.GGMLQuantizationType.F32,):
            if qtype == gguf.GGMLQuantizationType.F16:
                w.add_tensor(name, a.astype(np.float16))
            else:
                w.add_tensor(name, gguf.quants.quantize(a, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, a.astype(np.float32))

    add("token_embd.weight", rng.normal(0, 1, (vocab, d)).astype(np.float32))
    add("output_norm.weight", (1 + 0.1 * rng.standard_normal(d)).astype(np.float32), False)
    if arch == "qwen2":
        add("output.weight", mat(vocab, d))
    else:  # llama: tied embeddings and llama3-style per-frequency rope divisors
        add("rope_freqs.weight", rng.uniform(1, 8, hd // 2).astype(np.float32), False)
    for i in range(n_layers):
        p = f"blk.{i}."
        q, k = mat(n_heads * hd, d), mat(n_kv * hd, d)
        if arch == "llama":
            q, k = permute(q, n_heads), permute(k, n_kv)
        add(p + "attn_norm.weight", (1 + 0.1 * rng.standard_normal(d)).astype(np.float32), False)
        add(p + "attn_q.weight", q)
        add(p + "attn_k.weight", k)
        add(p + "attn_v.weight", mat(n_kv * hd, d))
        add(p + "attn_output.weight", mat(d, n_heads * hd))
        if arch == "qwen2":
            for name, n in (("attn_q", n_heads * hd), ("attn_k", n_kv * hd), ("attn_v", n_kv * hd)):
                add(p + name + ".bias", (0.1 * rng.standard_normal(n)).astype(np.float32), False)
        add(p + "ffn_norm.weight", (1 + 0.1 * rng.standard_normal(d)).astype(np.float32), False)
        add(p + "ffn_gate.weight", mat(ff, d))
        add(p + "ffn_up.weight", mat(ff, d))
        add(p + "ffn_down.weight", mat(d, ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return vocab


def main():
    Q = gguf.GGMLQuantizationType
    with tempfile.TemporaryDirectory() as tmp:
        seed = 0
        for arch in ("llama", "qwen2"):
            for qtype in (Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1):
                seed += 1
                path = Path(tmp) / f"{arch}-{qtype.name}.gguf"
                vocab = write_synthetic(path, arch, qtype, seed)
                ids = [int(x) for x in np.random.default_rng(100 + seed).integers(0, vocab, 32)]
                check_model(f"synthetic {arch} {qtype.name}", path, ids, tmp)

        smol = CACHE / "models" / "smollm2-135m-instruct-q4_1.gguf"
        if not smol.exists():
            failures.append(f"{smol} missing: run `make models`")
        else:
            text = ("The quick brown fox jumps over the lazy dog. In the beginning, the universe "
                    "was created. This has made a lot of people very angry and been widely regarded "
                    "as a bad move.")
            ids = json.loads(run("tokenize", "-m", smol, "--no-bos", text))[:32]
            assert len(ids) == 32, f"prompt has {len(ids)} tokens, want 32"
            check_model("SmolLM2-135M", str(smol), ids, tmp)
    if failures:
        print("FAILED: " + ", ".join(failures))
        sys.exit(1)
    print("all reference comparisons passed")


if __name__ == "__main__":
    main()
