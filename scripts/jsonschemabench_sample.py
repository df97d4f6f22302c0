#!/usr/bin/env python3
"""Writes the JSONSchemaBench test set of tests/data/jsonschemabench/ from a
checkout of github.com/guidance-ai/jsonschemabench (its data/ directory):
per subset, the schemas of at most --max-bytes (compact) with the lowest
SHA-256 of their file names, --per-subset of them. Deterministic: the same
data gives the same file.

  scripts/jsonschemabench_sample.py --data /tmp/jsb/data \\
      --out tests/data/jsonschemabench/schemas.jsonl
"""
import argparse
import hashlib
import json
import os

from schema_coverage import SUBSETS


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-subset", type=int, default=40)
    ap.add_argument("--max-bytes", type=int, default=12000)
    args = ap.parse_args()
    lines = []
    for name, d in SUBSETS:
        files = sorted(os.listdir(os.path.join(args.data, d)),
                       key=lambda f: hashlib.sha256(f.encode()).hexdigest())
        taken = 0
        for fn in files:
            if taken == args.per_subset:
                break
            with open(os.path.join(args.data, d, fn), "rb") as f:
                try:
                    schema = json.loads(f.read())
                except ValueError:
                    continue
            text = json.dumps({"subset": name, "name": fn, "schema": schema},
                              ensure_ascii=False, separators=(",", ":"))
            if len(text.encode()) > args.max_bytes:
                continue
            lines.append(text)
            taken += 1
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines)} schemas, {sum(len(l.encode()) + 1 for l in lines)} bytes")


if __name__ == "__main__":
    main()
