"""`tandem tokenize` end to end: the llama.cpp vocabulary test vectors through
the CLI's --jsonl mode (a vocab-only GGUF and a tokenizer.json), the plain
TEXT mode, and a bad input line."""
import json
import os
import subprocess
import sys
from pathlib import Path

TANDEM = os.environ.get("TANDEM_BIN", "build/tandem")
SHARED = Path(os.environ.get("TANDEM_SOURCE_DIR", ".")).resolve().parent / "shared" / "testdata"
failures = []


def cases(name):
    base = SHARED / "tokenizers" / "llamacpp-vocab" / f"ggml-vocab-{name}.gguf"
    texts = base.with_suffix(".gguf.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    ids = [[int(x) for x in line.split()] for line in
           base.with_suffix(".gguf.out").read_text().splitlines()]
    return texts[: len(ids)], ids


def check_jsonl(label, model, texts, want):
    stdin = "".join(json.dumps(t) + "\n" for t in texts)
    r = subprocess.run([TANDEM, "tokenize", "-m", str(model), "--jsonl", "--no-bos",
                        "--no-special"], input=stdin, capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"{label}: exit {r.returncode}: {r.stderr.strip()}")
        return
    got = [json.loads(line) for line in r.stdout.splitlines()]
    bad = sum(g != w for g, w in zip(got, want)) + abs(len(got) - len(want))
    print(f"{label}: {len(want) - bad}/{len(want)} cases match")
    if bad:
        failures.append(label)


def main():
    if not SHARED.is_dir():
        sys.exit(f"FAILED: shared test data not found at {SHARED}")
    for name in ("llama-spm", "gpt-2", "starcoder"):
        texts, ids = cases(name)
        check_jsonl(f"vocab {name}", SHARED / "tokenizers" / "llamacpp-vocab" /
                    f"ggml-vocab-{name}.gguf", texts, ids)
    texts, ids = cases("llama-bpe")
    check_jsonl("llama3 tokenizer.json", SHARED / "tokenizers" / "llama3" / "tokenizer.json",
                texts, ids)
    # TEXT mode with special tokens parsed (the default).
    out = subprocess.run([TANDEM, "tokenize", "-m", str(SHARED / "tokenizers" / "llama3" /
                          "tokenizer.json"), "<|begin_of_text|>Hello world"],
                         capture_output=True, text=True)
    if json.loads(out.stdout) != [128000, 9906, 1917]:
        failures.append(f"text mode: {out.stdout.strip()} {out.stderr.strip()}")
    # A bad line names its line number and fails.
    bad = subprocess.run([TANDEM, "tokenize", "-m", str(SHARED / "tokenizers" / "llama3" /
                          "tokenizer.json"), "--jsonl"], input='"ok"\n{not json\n',
                         capture_output=True, text=True)
    if bad.returncode == 0 or "line 2" not in bad.stderr:
        failures.append(f"bad jsonl line: exit {bad.returncode}: {bad.stderr.strip()}")
    if failures:
        print("FAILED: " + "; ".join(failures))
        sys.exit(1)
    print("tokenize CLI ok")


if __name__ == "__main__":
    main()
