#!/usr/bin/env python3
"""Plain decode speed of tandem and llama.cpp on the same GGUF files, side by side.

llama.cpp comes from the PyPI package llama-cpp-python, installed (compiled from
source for this CPU, which takes a while on 2 cores) into its own virtual
environment, ~/.cache/tandem/llamacpp-venv by default, never the test venv. Both
engines get the same thread count, prompt length and number of decoded tokens;
each decodes one token per forward pass (no speculation, no sampling cost).

  scripts/compare_llamacpp.py [-t 2] [--tandem build/tandem] [--models a.gguf b.gguf]

Not part of `make test`.
"""
import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

CACHE = Path(os.environ.get("TANDEM_CACHE", Path.home() / ".cache" / "tandem"))
DEFAULT_MODELS = [
    "smollm2-135m-instruct-q4_1.gguf",
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
]

# Runs inside the llama.cpp venv: prefill a fixed prompt, then time decode.
LLAMA_BENCH = textwrap.dedent("""
    import json, sys, time
    from llama_cpp import Llama
    path, threads, n_prompt, n_gen = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    llm = Llama(model_path=path, n_threads=threads, n_threads_batch=threads,
                n_ctx=n_prompt + n_gen + 16, n_batch=512, verbose=False)
    vocab = llm.n_vocab()
    ids = [(1234 + 7919 * i) % vocab for i in range(n_prompt + n_gen)]
    llm.eval(ids[:1]); llm.reset()  # warm-up: page the weights in
    t0 = time.perf_counter(); llm.eval(ids[:n_prompt]); prefill = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(n_gen):
        llm.eval([ids[n_prompt + i]])
    decode = time.perf_counter() - t0
    import llama_cpp
    print(json.dumps({"prefill_tok_per_s": n_prompt / prefill, "decode_tok_per_s": n_gen / decode,
                      "version": llama_cpp.__version__}))
""")


def ensure_llamacpp(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if python.exists() and subprocess.run([python, "-c", "import llama_cpp"],
                                          capture_output=True).returncode == 0:
        return python
    print(f"installing llama-cpp-python into {venv} (compiles llama.cpp; this takes a while)",
          flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = dict(os.environ)
    env.setdefault("CMAKE_ARGS", "-DGGML_NATIVE=ON -DGGML_CUDA=OFF -DLLAMA_CURL=OFF")
    subprocess.run([python, "-m", "pip", "install", "--no-cache-dir", "llama-cpp-python"],
                   check=True, env=env)
    return python


def last_json_line(text: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"no JSON line in output:\n{text}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--prompt", type=int, default=32, help="prompt tokens (default 32)")
    ap.add_argument("--gen", type=int, default=64, help="decoded tokens (default 64)")
    ap.add_argument("--tandem", default="build/tandem", help="the tandem binary")
    ap.add_argument("--venv", default=str(CACHE / "llamacpp-venv"))
    ap.add_argument("--models", nargs="*", help="GGUF files (default: the cached models)")
    args = ap.parse_args()

    models = [Path(m) for m in args.models] if args.models else \
        [CACHE / "models" / m for m in DEFAULT_MODELS if (CACHE / "models" / m).exists()]
    if not models:
        print("no models: run `make models` or pass --models", file=sys.stderr)
        return 1
    python = ensure_llamacpp(Path(args.venv))

    rows = []
    for model in models:
        tandem = subprocess.run(
            [args.tandem, "bench", "decode", "-m", str(model), "-t", str(args.threads),
             "--prompt", str(args.prompt), "--gen", str(args.gen)],
            capture_output=True, text=True, check=True)
        t = last_json_line(tandem.stdout)
        llama = subprocess.run(
            [python, "-c", LLAMA_BENCH, str(model), str(args.threads), str(args.prompt),
             str(args.gen)], capture_output=True, text=True, check=True)
        ll = last_json_line(llama.stdout)
        rows.append((model.name, t, ll))

    print(f"\nplain decode, {args.threads} threads, {args.prompt}-token prompt, "
          f"{args.gen} decoded tokens (llama.cpp {rows[0][2]['version']} via llama-cpp-python)")
    header = (f"{'model':44} {'tandem tok/s':>13} {'llama.cpp tok/s':>16} {'ratio':>6} "
              f"{'tandem prefill':>15} {'llama.cpp prefill':>18} {'bw fraction':>12}")
    print(header)
    print("-" * len(header))
    for name, t, ll in rows:
        print(f"{name:44} {t['decode_tok_per_s']:13.2f} {ll['decode_tok_per_s']:16.2f} "
              f"{t['decode_tok_per_s'] / ll['decode_tok_per_s']:6.2f} "
              f"{t['prefill_tok_per_s']:15.1f} {ll['prefill_tok_per_s']:18.1f} "
              f"{t['bandwidth_fraction']:12.2f}")
    print(json.dumps([{"model": n, "tandem": t, "llama_cpp": ll} for n, t, ll in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
