"""scripts/compare_llamacpp.py's pairing and summary (the script itself needs
llama-cpp-python, which `make test` does not build, so only its pure parts run
here):

- the engines take turns, each going first in every other round;
- the figure is the median of the rounds' ratios, not the ratio of the medians,
  so that a round in which the host slowed both engines counts as one ratio;
- the fractions of the paired bandwidth bound are medians too, and their ratio
  is stated;
- no rounds is an error, not a division by zero;
- llama.cpp is built for the CPU, without AMX where the CPU has it."""
import importlib.util
import os
from pathlib import Path

ROOT = Path(os.environ.get("TANDEM_SOURCE_DIR", Path(__file__).resolve().parents[2]))
spec = importlib.util.spec_from_file_location("compare_llamacpp",
                                              ROOT / "scripts" / "compare_llamacpp.py")
compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare)


def main():
    orders = [compare.round_order(i) for i in range(4)]
    assert orders[0][0] == "tandem" and orders[1][0] == "llama.cpp", f"alternate: {orders}"
    assert orders[2] == orders[0] and orders[3] == orders[1], f"alternate: {orders}"
    assert all(sorted(o) == ["llama.cpp", "tandem"] for o in orders), "both run every round"

    # Round 2: the host slowed both engines; its ratio is still 1.5.
    rounds = [
        {"tandem": 60.0, "llama": 40.0, "tandem_fraction": 0.84, "llama_fraction": 0.55},
        {"tandem": 30.0, "llama": 20.0, "tandem_fraction": 0.80, "llama_fraction": 0.50},
        {"tandem": 58.0, "llama": 29.0, "tandem_fraction": 0.82, "llama_fraction": 0.60},
    ]
    s = compare.summarize(rounds)
    assert abs(s["ratio"] - 1.5) < 1e-12, f"median of the ratios 1.5, 1.5, 2.0: {s['ratio']}"
    assert s["ratios"] == [1.5, 1.5, 2.0], f"each round's ratio: {s['ratios']}"
    assert (s["tandem_tok_per_s"], s["llama_tok_per_s"]) == (58.0, 29.0), "medians of the rates"
    assert abs(s["ratio"] - s["tandem_tok_per_s"] / s["llama_tok_per_s"]) > 0.4, \
        "the ratio of the medians (2.0) is not the figure"
    assert (s["tandem_fraction"], s["llama_fraction"]) == (0.82, 0.55), "median fractions"
    assert abs(s["fraction_ratio"] - 0.82 / 0.55) < 1e-12, f"fraction ratio {s['fraction_ratio']}"
    try:
        compare.summarize([])
    except ValueError:
        pass
    else:
        raise AssertionError("no rounds must raise")
    # The build: -march=native, except on a CPU with AMX, whose instruction
    # sets are named one by one without AMX (its weight buffer crashed there).
    zen = {"avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512_vnni", "avx512_bf16"}
    args = compare.llamacpp_cmake_args(zen)
    assert "-DGGML_NATIVE=ON" in args and "AMX" not in args, args
    xeon = zen | {"avx512vbmi", "amx_tile", "amx_int8", "amx_bf16"}
    args = compare.llamacpp_cmake_args(xeon).split()
    assert "-DGGML_NATIVE=OFF" in args, args
    for opt in ("GGML_AVX512", "GGML_AVX512_VNNI", "GGML_AVX512_VBMI", "GGML_AVX2", "GGML_FMA"):
        assert f"-D{opt}=ON" in args, f"{opt} on: {args}"
    assert "-DGGML_AVX_VNNI=OFF" in args, f"a flag the CPU lacks is off: {args}"
    for opt in ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16"):
        assert f"-D{opt}=OFF" in args, f"{opt} off: {args}"
    print("all ok")


if __name__ == "__main__":
    main()
