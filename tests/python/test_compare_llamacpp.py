"""scripts/compare_llamacpp.py's pairing and summary (the script itself needs
llama-cpp-python, which `make test` does not build, so only its pure parts run
here):

- the engines take turns, each going first in every other round;
- the figure is the median of the rounds' ratios, not the ratio of the medians,
  so that a round in which the host slowed both engines counts as one ratio;
- the fractions of the paired bandwidth bound are medians too, and their ratio
  is stated;
- no rounds is an error, not a division by zero."""
import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(os.environ.get("TANDEM_SOURCE_DIR", Path(__file__).resolve().parents[2]))
spec = importlib.util.spec_from_file_location("compare_llamacpp",
                                              ROOT / "scripts" / "compare_llamacpp.py")
compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare)

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}")


def main():
    orders = [compare.round_order(i) for i in range(4)]
    check(orders[0][0] == "tandem" and orders[1][0] == "llama.cpp" and orders[2] == orders[0]
          and orders[3] == orders[1], f"engines alternate going first: {orders}")
    check(all(sorted(o) == ["llama.cpp", "tandem"] for o in orders), "both run every round")

    # Round 2: the host slowed both engines; its ratio is still 1.5.
    rounds = [
        {"tandem": 60.0, "llama": 40.0, "tandem_fraction": 0.84, "llama_fraction": 0.55},
        {"tandem": 30.0, "llama": 20.0, "tandem_fraction": 0.80, "llama_fraction": 0.50},
        {"tandem": 58.0, "llama": 29.0, "tandem_fraction": 0.82, "llama_fraction": 0.60},
    ]
    s = compare.summarize(rounds)
    check(abs(s["ratio"] - 1.5) < 1e-12, f"median of the ratios 1.5, 1.5, 2.0: {s['ratio']}")
    check(s["ratios"] == [1.5, 1.5, 2.0], f"each round's ratio: {s['ratios']}")
    check(s["tandem_tok_per_s"] == 58.0 and s["llama_tok_per_s"] == 29.0,
          f"medians of the rates: {s['tandem_tok_per_s']}, {s['llama_tok_per_s']}")
    check(abs(s["ratio"] - s["tandem_tok_per_s"] / s["llama_tok_per_s"]) > 0.4,
          "the ratio of the medians (2.0) is not the figure")
    check(s["tandem_fraction"] == 0.82 and s["llama_fraction"] == 0.55,
          f"median fractions: {s['tandem_fraction']}, {s['llama_fraction']}")
    check(abs(s["fraction_ratio"] - 0.82 / 0.55) < 1e-12, f"fraction ratio: {s['fraction_ratio']}")
    try:
        compare.summarize([])
        check(False, "no rounds raises")
    except ValueError:
        pass


if __name__ == "__main__":
    main()
    if failures:
        print(f"FAILED: {len(failures)}: {', '.join(failures)}")
        sys.exit(1)
    print("all ok")
