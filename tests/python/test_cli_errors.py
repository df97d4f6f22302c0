"""Bad input to the tandem CLI: every case must exit non-zero with one clear
error line on stderr naming the file (or option) and the problem - never a
crash, a hang or a traceback-like dump."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import gguf

TANDEM = os.environ.get("TANDEM_BIN", "build/tandem")
failures = []


def expect_error(label, args, must_contain, stdin=None):
    try:
        r = subprocess.run([TANDEM, *map(str, args)], capture_output=True, text=True, timeout=60,
                           input=stdin)
    except subprocess.TimeoutExpired:
        failures.append(f"{label}: hung")
        print(f"{label}: HUNG")
        return
    err = r.stderr.strip()
    lines = err.splitlines()
    ok = (r.returncode not in (0,) and r.returncode > 0 and len(lines) == 1
          and all(s in err for s in must_contain))
    print(f"{label}: exit {r.returncode}: {err!r} {'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append(label)


CUDA_REASONS = ("--device cuda: no CUDA device found",
                "--device cuda: this build has no CUDA kernels (configure with -DTANDEM_CUDA=ON)")


def cuda_device_errors(good):
    """--device cuda where CUDA cannot run (a build without the kernels, or no
    device): every command that takes it fails with one line naming the
    problem, before it loads a model or listens. Skipped where a device is."""
    probe = subprocess.run([TANDEM, "generate", "-m", str(good), "--ids", "1,2", "-n", "1",
                            "--device", "cuda"], capture_output=True, text=True, timeout=120)
    if probe.returncode == 0:
        print("--device cuda: a CUDA device is present; its error cases skipped")
        return
    reason = next((r for r in CUDA_REASONS if r in probe.stderr), None)
    if reason is None:
        failures.append("--device cuda probe")
        print(f"--device cuda probe: exit {probe.returncode}: {probe.stderr!r} FAIL")
        return
    for label, args in [
            ("generate --device cuda", ["generate", "-m", good, "--ids", "1,2", "-n", "2"]),
            ("serve --device cuda", ["serve", "-m", good, "--port", "0"]),
            ("bench decode --device cuda", ["bench", "decode", "-m", good]),
            ("bench serve --device cuda", ["bench", "serve", "-m", good]),
            ("bench spec --device cuda", ["bench", "spec", "-m", good, "-d", "ngram"])]:
        expect_error(label, [*args, "--device", "cuda"], [reason])
    expect_error("unknown --device", ["generate", "-m", good, "--ids", "1,2", "--device", "tpu"],
                 ["--device", "tpu"])
    expect_error("unknown --cuda-gemv",
                 ["generate", "-m", good, "--ids", "1,2", "--cuda-gemv", "rows"],
                 ["--cuda-gemv", "rows"])


def write_model(path, arch="llama", drop=None, reshape=None, raw_type=None, vocab=64):
    """A tiny llama GGUF written by gguf-py, optionally damaged."""
    rng = np.random.default_rng(0)
    d, ff = 32, 64
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(d)
    w.add_feed_forward_length(ff)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    shapes = {
        "token_embd.weight": (vocab, d), "output_norm.weight": (d,),
        "blk.0.attn_norm.weight": (d,), "blk.0.attn_q.weight": (d, d),
        "blk.0.attn_k.weight": (d, d), "blk.0.attn_v.weight": (d, d),
        "blk.0.attn_output.weight": (d, d), "blk.0.ffn_norm.weight": (d,),
        "blk.0.ffn_gate.weight": (ff, d), "blk.0.ffn_up.weight": (ff, d),
        "blk.0.ffn_down.weight": (d, ff),
    }
    for name, shape in shapes.items():
        if name == drop:
            continue
        if name == reshape:
            shape = (shape[0] + 1,) + shape[1:]
        a = rng.standard_normal(shape).astype(np.float32)
        if name == raw_type:
            # A type tandem does not support (IQ2_XXS: 66 bytes per 256 values); the
            # type is refused when the file is read, before shapes are checked.
            w.add_tensor(name, np.zeros((shape[0], 66), np.uint8),
                         raw_dtype=gguf.GGMLQuantizationType.IQ2_XXS)
        else:
            w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        good = t / "good.gguf"
        write_model(good)
        expect_error("missing file", ["info", "-m", t / "nope.gguf"], ["nope.gguf"])
        expect_error("directory without config", ["info", "-m", tmp], [tmp])
        (t / "text.gguf").write_text("this is not a model\n" * 10)
        expect_error("not a GGUF", ["info", "-m", t / "text.gguf"], ["text.gguf", "GGUF"])
        data = good.read_bytes()
        for frac in (0.01, 0.3, 0.9):
            cut = t / f"cut{frac}.gguf"
            cut.write_bytes(data[: int(len(data) * frac)])
            expect_error(f"truncated at {frac:.0%}", ["info", "-m", cut], [cut.name, "truncated"])
        write_model(t / "arch.gguf", arch="gptx")
        expect_error("unknown architecture", ["info", "-m", t / "arch.gguf"], ["arch.gguf", "gptx"])
        write_model(t / "drop.gguf", drop="blk.0.ffn_up.weight")
        expect_error("missing tensor", ["info", "-m", t / "drop.gguf"],
                     ["drop.gguf", "blk.0.ffn_up.weight"])
        write_model(t / "shape.gguf", reshape="blk.0.attn_v.weight")
        expect_error("mis-shaped tensor", ["info", "-m", t / "shape.gguf"],
                     ["shape.gguf", "blk.0.attn_v.weight", "shape"])
        write_model(t / "type.gguf", raw_type="blk.0.ffn_gate.weight")
        expect_error("unsupported tensor type", ["info", "-m", t / "type.gguf"],
                     ["type.gguf", "blk.0.ffn_gate.weight"])
        expect_error("token id outside the vocabulary",
                     ["generate", "-m", good, "--ids", "1,2,999", "-n", "2"], ["999"])
        expect_error("bad --ids", ["generate", "-m", good, "--ids", "1,x", "-n", "2"], ["x"])
        expect_error("no tokenizer for text", ["generate", "-m", good, "-p", "hello"],
                     ["tokenizer"])
        expect_error("negative temperature",
                     ["generate", "-m", good, "--ids", "1,2", "--temp", "-1"], ["temperature"])
        expect_error("context overflow",
                     ["generate", "-m", good, "--ids", "1,2", "-n", "100000"], ["context"])
        # Speculative decoding options.
        expect_error("K < 1", ["generate", "-m", good, "--ids", "1,2", "-n", "4", "-d", "ngram", "-k", "0"],
                     ["-k", "0"])
        expect_error("K not a number",
                     ["generate", "-m", good, "--ids", "1,2", "-n", "4", "-d", "ngram", "-k", "five"],
                     ["five"])
        expect_error("--draft-always with -k auto",
                     ["generate", "-m", good, "--ids", "1,2", "-n", "4", "-d", "ngram", "-k", "auto",
                      "--draft-always"], ["--draft-always", "auto"])
        expect_error("--no-draft-lookup without a draft model",
                     ["generate", "-m", good, "--ids", "1,2", "-n", "4", "-d", "ngram",
                      "--no-draft-lookup"], ["--no-draft-lookup", "draft model", "ngram"])
        expect_error("--draft-lookup and --no-draft-lookup",
                     ["generate", "-m", good, "--ids", "1,2", "-n", "4", "-d", "ngram",
                      "--draft-lookup", "--no-draft-lookup"], ["--draft-lookup", "--no-draft-lookup"])
        expect_error("--lookup with --no-draft-lookup",
                     ["generate", "-m", good, "--ids", "1,2", "-n", "4", "-d", "ngram",
                      "--no-draft-lookup", "--lookup", "suffix"], ["--no-draft-lookup", "--lookup"])
        expect_error("unknown --draft-quant",
                     ["generate", "-m", good, "--ids", "1,2", "-n", "4", "-d", good,
                      "--draft-quant", "q3_k"], ["--draft-quant", "q3_k", "q4_0", "none"])
        expect_error("missing draft model",
                     ["generate", "-m", good, "--ids", "1,2", "-n", "4", "-d", t / "nodraft.gguf"],
                     ["nodraft.gguf"])
        expect_error("draft that is not a model",
                     ["generate", "-m", good, "--ids", "1,2", "-n", "4", "-d", t / "text.gguf"],
                     ["text.gguf"])
        write_model(t / "vocab80.gguf", vocab=80)
        expect_error("draft with another vocabulary",
                     ["generate", "-m", good, "--ids", "1,2", "-n", "4", "-d", t / "vocab80.gguf"],
                     ["vocab80.gguf", "80", "64"])
        cuda_device_errors(good)
        expect_error("synth-model: unknown shape",
                     ["synth-model", "--shape", "llama-9b", "-o", t / "s.gguf"],
                     ["'llama-9b'", "llama-3.2-3b-bf16"])
        expect_error("synth-model: unwritable output",
                     ["synth-model", "--shape", "qwen2.5-coder-0.5b-q4_k_m", "-o",
                      t / "no_such_dir" / "s.gguf"], ["no_such_dir"])
        expect_error("bench decode: --batch 0", ["bench", "decode", "-m", good, "--batch", "0"],
                     ["--batch", "0"])
        smol = Path(os.environ.get("TANDEM_CACHE", Path.home() / ".cache/tandem")) / \
            "models/smollm2-135m-instruct-q4_1.gguf"
        if smol.exists():  # prompt sets need a model with a tokenizer
            bad = t / "schemas.jsonl"
            bad.write_text('{"prompt": "hi", "chat": true}\n'
                           '{"prompt": "hi", "json_schema": {"type": "integer", "multipleOf": 3}}\n')
            expect_error("prompt set with an unsupported schema",
                         ["bench", "spec", "-m", smol, "-d", "ngram", "--prompts", bad],
                         ["schemas.jsonl:2", "multipleOf"])
    if failures:
        print("FAILED: " + ", ".join(failures))
        sys.exit(1)
    print("all error cases behaved")


if __name__ == "__main__":
    main()
