#!/usr/bin/env python3
"""JSONSchemaBench (Geng et al., arXiv 2501.10868) against tandem's schema compiler.

Two measures, per subset of the benchmark:

  coverage    declared coverage: the share of schemas that tandem compiles (the
              rest are refused with a SchemaError naming a keyword). Driven
              through build/bench/tandem_schema_coverage, one schema per line.
  compliance  for the first --per-subset schemas of each subset (in SHA-256
              order of their names) that the server accepts, generate one
              document with `tandem serve` (OpenAI client, response_format
              json_schema, temperature 0) and validate it with Python's
              `jsonschema` (formats checked: install jsonschema[format-nongpl]).
              A document cut by max_tokens is counted as unfinished, not as
              non-compliant.

The data: the directory data/ of github.com/guidance-ai/jsonschemabench (one
JSON file per schema in data/<Subset>/), or a JSONL test set of
{"subset", "name", "schema"} lines such as tests/data/jsonschemabench/.

  scripts/schema_coverage.py coverage --data /tmp/jsb/data
  scripts/schema_coverage.py compliance --data /tmp/jsb/data \\
      --server http://127.0.0.1:8080 --per-subset 20 --max-tokens 512
"""
import argparse
import collections
import hashlib
import json
import os
import re
import selectors
import subprocess
import sys
import time

# The subsets the report covers, in the paper's order, by their directory names.
SUBSETS = [
    ("GlaiveAI", "Glaiveai2K"),
    ("GitHub-Easy", "Github_easy"),
    ("GitHub-Medium", "Github_medium"),
    ("GitHub-Hard", "Github_hard"),
    ("Kubernetes", "Kubernetes"),
    ("Snowplow", "Snowplow"),
    ("WashingtonPost", "WashingtonPost"),
    ("JSONSchemaStore", "JsonSchemaStore"),
]
SUBSET_OF_DIR = {d: n for n, d in SUBSETS}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TOOL = os.path.join(REPO, "build", "bench", "tandem_schema_coverage")


def load(data):
    """(subset, name, schema text) for every schema, sorted: a file of JSONL or a data dir."""
    out = []
    if os.path.isfile(data):
        with open(data) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    out.append((r["subset"], r["name"], json.dumps(r["schema"])))
        return sorted(out)
    for name, d in SUBSETS:
        path = os.path.join(data, d)
        if not os.path.isdir(path):
            continue
        for fn in sorted(os.listdir(path)):
            with open(os.path.join(path, fn), "rb") as f:
                text = f.read().decode("utf-8", "replace")
            try:  # one line per schema, key order kept (json.loads keeps it)
                text = json.dumps(json.loads(text), ensure_ascii=False)
            except ValueError:
                text = text.replace("\n", " ")
            out.append((name, fn, text))
    return out


def compile_all(tool, schemas, timeout_s):
    """The tool's verdict for each schema; a compile over timeout_s is a 'timeout' refusal."""
    results = []
    i = 0
    while i < len(schemas):
        proc = subprocess.Popen([tool], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, bufsize=1)
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        # Feed one at a time so that a stuck schema is known.
        while i < len(schemas):
            proc.stdin.write(schemas[i][2] + "\n")
            proc.stdin.flush()
            if not sel.select(timeout_s):
                proc.kill()
                proc.wait()
                results.append({"ok": False, "path": None,
                                "error": f"timeout: no verdict in {timeout_s} s"})
                print(f"timeout: {schemas[i][0]}/{schemas[i][1]}", file=sys.stderr)
                i += 1
                break
            line = proc.stdout.readline()
            if not line:  # the tool died: a crash is a bug, reported as such
                proc.wait()
                results.append({"ok": False, "path": None,
                                "error": f"CRASH: the tool exited with {proc.returncode}"})
                i += 1
                break
            results.append(json.loads(line))
            i += 1
        else:
            proc.stdin.close()
            proc.wait()
    return results


def keyword_of(result):
    """The keyword a refusal names: the last token of its pointer when it is one, else the
    first quoted word of the message."""
    path = result.get("path")
    if path:
        last = path.rsplit("/", 1)[-1]
        if not last.isdigit() and path.rsplit("/", 2)[-2:-1] != ["properties"]:
            return last
    m = re.search(r"'([$A-Za-z]+)'", result.get("error", ""))
    return m.group(1) if m else result.get("error", "")[:40]


def cmd_coverage(args):
    schemas = load(args.data)
    results = compile_all(args.tool, schemas, args.timeout)
    by_subset = collections.defaultdict(lambda: [0, 0])
    reasons = collections.defaultdict(collections.Counter)
    slow = []
    records = []
    for (subset, name, _), r in zip(schemas, results):
        by_subset[subset][1] += 1
        by_subset[subset][0] += r["ok"]
        if r["ok"]:
            slow.append((r["ms"], subset, name, r["states"]))
        else:
            reasons[subset][keyword_of(r)] += 1
        records.append({"subset": subset, "name": name, **r})
    if args.out:
        with open(args.out, "w") as f:
            for rec in records:
                f.write(json.dumps(rec) + "\n")
    print(f"{'subset':16} {'schemas':>8} {'accepted':>9} {'coverage':>9}  top refusals")
    total = [0, 0]
    for name, _ in SUBSETS:
        if name not in by_subset:
            continue
        ok, n = by_subset[name]
        total[0] += ok
        total[1] += n
        top = ", ".join(f"{k} {c}" for k, c in reasons[name].most_common(args.top))
        print(f"{name:16} {n:8} {ok:9} {100.0 * ok / n:8.1f}%  {top}")
    print(f"{'all':16} {total[1]:8} {total[0]:9} {100.0 * total[0] / max(total[1], 1):8.1f}%")
    slow.sort(reverse=True)
    print("slowest compiles:",
          ", ".join(f"{s}/{n} {ms:.0f} ms ({st} states)" for ms, s, n, st in slow[:5]))
    bugs = [rec for rec in records if not rec["ok"] and
            (rec["error"].startswith(("CRASH", "INTERNAL", "timeout")))]
    for b in bugs:
        print("NOT A SCHEMA ERROR:", b["subset"], b["name"], b["error"][:200])
    return 1 if bugs else 0


def by_hash(schemas, subset):
    """A subset's schemas in a deterministic order that mixes them: by SHA-256 of the name."""
    mine = [s for s in schemas if s[0] == subset]
    return sorted(mine, key=lambda s: hashlib.sha256(s[1].encode()).hexdigest())


def cmd_compliance(args):
    import jsonschema
    import openai

    schemas = load(args.data)
    client = openai.OpenAI(base_url=args.server.rstrip("/") + "/v1", api_key="none",
                           timeout=args.request_timeout, max_retries=0)
    counts = collections.defaultdict(collections.Counter)
    failures = []
    t0 = time.time()
    for subset, _ in SUBSETS:
        # The first per_subset schemas in hash order that the server accepts
        # (a refused schema is a 400 before any decoding).
        for _, name, text in by_hash(schemas, subset):
            if counts[subset]["sampled"] == args.per_subset:
                break
            schema = json.loads(text)
            prompt = ("Write one short JSON document that is valid against this JSON Schema, "
                      "with short strings. Reply with the JSON only.\n" + text[:args.prompt_chars])
            try:
                resp = client.chat.completions.create(
                    model=args.model, messages=[{"role": "user", "content": prompt}],
                    temperature=0, max_tokens=args.max_tokens,
                    response_format={"type": "json_schema",
                                     "json_schema": {"name": "doc", "schema": schema}})
            except openai.BadRequestError as e:
                body = e.body if isinstance(e.body, dict) else {}
                if body.get("code") == "unsupported_schema" or "unsupported_schema" in str(body):
                    counts[subset]["refused"] += 1
                    continue
                counts[subset]["sampled"] += 1
                counts[subset]["request error"] += 1
                failures.append((subset, name, f"HTTP 400: {str(e)[:300]}"))
                continue
            except (openai.APIStatusError, openai.APITimeoutError, openai.APIConnectionError) as e:
                counts[subset]["sampled"] += 1
                counts[subset]["request error"] += 1
                failures.append((subset, name, f"{type(e).__name__}: {str(e)[:300]}"))
                continue
            counts[subset]["sampled"] += 1
            choice = resp.choices[0]
            if choice.finish_reason == "length":
                counts[subset]["unfinished"] += 1
                continue
            try:
                doc = json.loads(choice.message.content)
            except ValueError as e:
                counts[subset]["invalid"] += 1
                failures.append((subset, name, f"not JSON: {e}: {choice.message.content[:200]!r}"))
                continue
            cls = jsonschema.validators.validator_for(schema)
            errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(doc))
            if errors:
                counts[subset]["invalid"] += 1
                failures.append((subset, name, f"{errors[0].message[:200]} at "
                                 f"{list(errors[0].absolute_path)}: "
                                 f"{choice.message.content[:300]!r}"))
            else:
                counts[subset]["valid"] += 1
            if args.verbose:
                print(subset, name, choice.finish_reason, "ok" if not errors else "INVALID",
                      file=sys.stderr, flush=True)
    print(f"{'subset':16} {'sampled':>8} {'finished':>9} {'valid':>6} {'compliance':>11} "
          f"{'unfinished':>11} {'errors':>7}")
    for name, _ in SUBSETS:
        c = counts.get(name)
        if c is None:
            continue
        finished = c["valid"] + c["invalid"]
        comp = f"{100.0 * c['valid'] / finished:.1f}%" if finished else "-"
        print(f"{name:16} {c['sampled']:8} {finished:9} {c['valid']:6} {comp:>11} "
              f"{c['unfinished']:11} {c['request error']:7}")
    print(f"({time.time() - t0:.0f} s)")
    for f in failures:
        print("FAILED:", *f)
    return 1 if any(c["invalid"] for c in counts.values()) else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("coverage", "compliance"):
        p = sub.add_parser(name)
        p.add_argument("--data", required=True,
                       help="jsonschemabench's data/ directory, or a JSONL test set")
    cov = sub.choices["coverage"]
    cov.add_argument("--tool", default=DEFAULT_TOOL)
    cov.add_argument("--timeout", type=float, default=60,
                     help="seconds one schema may take to compile")
    cov.add_argument("--out", help="write each schema's verdict here (JSONL)")
    cov.add_argument("--top", type=int, default=4, help="refusal keywords listed per subset")
    comp = sub.choices["compliance"]
    comp.add_argument("--server", required=True, help="a running `tandem serve`")
    comp.add_argument("--per-subset", type=int, default=20)
    comp.add_argument("--max-tokens", type=int, default=512)
    comp.add_argument("--prompt-chars", type=int, default=2000,
                      help="the schema's text in the prompt is cut to this many characters")
    comp.add_argument("--request-timeout", type=float, default=300)
    comp.add_argument("--model", default="tandem", help="the model id to ask for")
    comp.add_argument("--verbose", action="store_true", help="a line per request on stderr")
    args = ap.parse_args()
    sys.exit(cmd_coverage(args) if args.cmd == "coverage" else cmd_compliance(args))


if __name__ == "__main__":
    main()
