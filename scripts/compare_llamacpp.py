#!/usr/bin/env python3
"""Plain decode speed of tandem and llama.cpp on the same GGUF files, side by side.

llama.cpp comes from the PyPI package llama-cpp-python (LLAMACPP_VERSION),
installed (compiled from source for this CPU, which takes a while on 2 cores;
on a CPU with AMX without it, see llamacpp_cmake_args) into its own virtual
environment, ~/.cache/tandem/llamacpp-venv by default, never the test venv; a
venv already there is used as it is (remove it to rebuild). Both
engines get the same thread count, prompt length and number of decoded tokens;
each decodes one token per forward pass (no speculation, no sampling cost).

On a shared host the memory bandwidth moves by tens of percent within seconds,
so one run of each engine compares two machines. The engines run in turns,
`--rounds` times (which goes first alternates), and each round gives a ratio;
the median is the figure. Each engine's rate is also stated as a fraction of
the bandwidth bound read beside it: tandem's by `bench decode` itself (passes
of `bench membw` between its steps), llama.cpp's by a `bench membw` pass right
after its run (the bytes a token reads are the model's weights, as tandem
counts them). The fractions compare the engines at equal bandwidth.

  scripts/compare_llamacpp.py [-t 2] [--rounds 3] [--tandem build/tandem] [--models a.gguf b.gguf]

Not part of `make test`.
"""
import argparse
import json
import os
import statistics
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


# The release the project's llama.cpp figures are of (issue #32 names it).
LLAMACPP_VERSION = "0.3.36"

# ggml's instruction-set options and the /proc/cpuinfo flag each needs.
GGML_ISA = [("GGML_AVX", "avx"), ("GGML_AVX2", "avx2"), ("GGML_FMA", "fma"),
            ("GGML_F16C", "f16c"), ("GGML_BMI2", "bmi2"), ("GGML_AVX_VNNI", "avx_vnni"),
            ("GGML_AVX512", "avx512f"), ("GGML_AVX512_VBMI", "avx512vbmi"),
            ("GGML_AVX512_VNNI", "avx512_vnni"), ("GGML_AVX512_BF16", "avx512_bf16")]


def cpu_flags() -> set:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def llamacpp_cmake_args(flags: set) -> str:
    """llama.cpp's build for this CPU: -march=native, except where the CPU has
    AMX. There -march=native compiles ggml's AMX weight buffer, which crashed
    while repacking the models' q4_K tensors on a KVM Xeon (docs/benchmarks.md,
    "Intel Xeon with AMX"); so it gets every other instruction set the CPU
    has, named one by one (its AVX-512 VNNI kernels, the ones tandem's are
    compared with), and no AMX."""
    common = "-DGGML_CUDA=OFF -DLLAMA_CURL=OFF"
    if not any(f.startswith("amx") for f in flags):
        return f"-DGGML_NATIVE=ON {common}"
    isa = " ".join(f"-D{opt}={'ON' if flag in flags else 'OFF'}" for opt, flag in GGML_ISA)
    return f"-DGGML_NATIVE=OFF {isa} -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF " \
           f"-DGGML_AMX_BF16=OFF {common}"


def ensure_llamacpp(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if python.exists() and subprocess.run([python, "-c", "import llama_cpp"],
                                          capture_output=True).returncode == 0:
        return python
    print(f"installing llama-cpp-python into {venv} (compiles llama.cpp; this takes a while)",
          flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = dict(os.environ)
    env.setdefault("CMAKE_ARGS", llamacpp_cmake_args(cpu_flags()))
    print(f"CMAKE_ARGS={env['CMAKE_ARGS']}", flush=True)
    subprocess.run([python, "-m", "pip", "install", "--no-cache-dir",
                    f"llama-cpp-python=={LLAMACPP_VERSION}"], check=True, env=env)
    return python


def last_json_line(text: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"no JSON line in output:\n{text}")


def round_order(i: int) -> tuple:
    """Which engine runs first in round i: they alternate, so that neither
    always meets the host as the other left it."""
    return ("tandem", "llama.cpp") if i % 2 == 0 else ("llama.cpp", "tandem")


def summarize(rounds: list) -> dict:
    """Rounds of one model, each {"tandem", "llama", "tandem_fraction",
    "llama_fraction"} (tokens/s and fractions of the paired bandwidth bound):
    the median of each round's ratio and of each engine's rate and fraction."""
    if not rounds:
        raise ValueError("no rounds to summarize")
    ratios = [r["tandem"] / r["llama"] for r in rounds]
    med = statistics.median
    tandem_fraction = med(r["tandem_fraction"] for r in rounds)
    llama_fraction = med(r["llama_fraction"] for r in rounds)
    return {"ratio": med(ratios), "ratios": ratios,
            "tandem_tok_per_s": med(r["tandem"] for r in rounds),
            "llama_tok_per_s": med(r["llama"] for r in rounds),
            "tandem_fraction": tandem_fraction, "llama_fraction": llama_fraction,
            "fraction_ratio": tandem_fraction / llama_fraction}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--prompt", type=int, default=32, help="prompt tokens (default 32)")
    ap.add_argument("--gen", type=int, default=64, help="decoded tokens (default 64)")
    ap.add_argument("--rounds", type=int, default=3, help="turns of both engines (default 3)")
    ap.add_argument("--tandem", default="build/tandem", help="the tandem binary")
    ap.add_argument("--venv", default=str(CACHE / "llamacpp-venv"))
    ap.add_argument("--models", nargs="*", help="GGUF files (default: the cached models)")
    args = ap.parse_args()
    if args.rounds < 1:
        print(f"--rounds must be at least 1, got {args.rounds}", file=sys.stderr)
        return 2

    models = [Path(m) for m in args.models] if args.models else \
        [CACHE / "models" / m for m in DEFAULT_MODELS if (CACHE / "models" / m).exists()]
    if not models:
        print("no models: run `make models` or pass --models", file=sys.stderr)
        return 1
    python = ensure_llamacpp(Path(args.venv))

    def run_tandem(model: Path) -> dict:
        out = subprocess.run(
            [args.tandem, "bench", "decode", "-m", str(model), "-t", str(args.threads),
             "--prompt", str(args.prompt), "--gen", str(args.gen)],
            capture_output=True, text=True, check=True)
        return last_json_line(out.stdout)

    def run_llama(model: Path) -> dict:
        out = subprocess.run(
            [python, "-c", LLAMA_BENCH, str(model), str(args.threads), str(args.prompt),
             str(args.gen)], capture_output=True, text=True, check=True)
        result = last_json_line(out.stdout)
        membw = subprocess.run([args.tandem, "bench", "membw", "-t", str(args.threads)],
                               capture_output=True, text=True, check=True)
        result["bandwidth_gb_s"] = last_json_line(membw.stdout)["bandwidth_gb_s"]
        return result

    rows = []
    for model in models:
        rounds, version = [], ""
        for i in range(args.rounds):
            got = {}
            for engine in round_order(i):
                got[engine] = run_tandem(model) if engine == "tandem" else run_llama(model)
            t, ll = got["tandem"], got["llama.cpp"]
            version = ll["version"]
            bound = ll["bandwidth_gb_s"] * 1e9 / t["weight_bytes_per_token"]
            rounds.append({"tandem": t["decode_tok_per_s"], "llama": ll["decode_tok_per_s"],
                           "tandem_fraction": t["bandwidth_fraction"],
                           "llama_fraction": ll["decode_tok_per_s"] / bound,
                           "tandem_prefill": t["prefill_tok_per_s"],
                           "llama_prefill": ll["prefill_tok_per_s"]})
        rows.append((model.name, version, rounds, summarize(rounds)))

    print(f"\nplain decode, {args.threads} threads, {args.prompt}-token prompt, "
          f"{args.gen} decoded tokens, {args.rounds} rounds in turns, medians "
          f"(llama.cpp {rows[0][1]} via llama-cpp-python)")
    header = (f"{'model':44} {'tandem tok/s':>13} {'llama.cpp tok/s':>16} {'ratio':>6} "
              f"{'of bound: tandem':>17} {'llama.cpp':>10}  ratio per round")
    print(header)
    print("-" * len(header))
    for name, _, _, s in rows:
        per_round = ", ".join(f"{r:.2f}" for r in s["ratios"])
        print(f"{name:44} {s['tandem_tok_per_s']:13.2f} {s['llama_tok_per_s']:16.2f} "
              f"{s['ratio']:6.2f} {s['tandem_fraction']:17.2f} {s['llama_fraction']:10.2f}  "
              f"{per_round}")
    print(json.dumps([{"model": n, "llama_cpp_version": v, "rounds": r, "summary": s}
                      for n, v, r, s in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
