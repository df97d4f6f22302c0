#!/usr/bin/env python3
"""Tool calls as a running server makes them, checked: every request of a
prompt set (prompts/tools.jsonl: a conversation and its tools) under each
tool_choice mode, with speculation and without. Counts the calls, those whose
arguments parse as JSON, those that validate against their function's
parameters (jsonschema, formats checked), the requests that stopped after calls,
and the requests whose message (content and calls) is the same with and without
speculation.

    scripts/tool_call_check.py --url http://127.0.0.1:8080 [--prompts prompts/tools.jsonl]
        [--modes auto,required] [--temperature 0] [--seed 7] [--json out.json]
"""
import argparse
import json
import sys
import time
import urllib.error
import urllib.request

import jsonschema


def post(url, body):
    """The response, or the error object of a refused request."""
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        return json.loads(e.read().decode() or "{}")


def message_key(choice):
    m = choice["message"]
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or []]
    return m.get("content"), calls, choice["finish_reason"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--prompts", default="prompts/tools.jsonl")
    ap.add_argument("--modes", default="auto,required")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--json", help="write the counts and every request's result here")
    a = ap.parse_args()
    requests = [json.loads(line) for line in open(a.prompts, encoding="utf-8") if line.strip()]
    checker = jsonschema.FormatChecker()
    rows, results = [], []
    for mode in a.modes.split(","):
        n = dict(requests=0, refused=0, calls=0, parsed=0, valid=0, stopped_after_calls=0, same=0,
                 drafted=0, accepted=0)
        t0 = time.time()
        for req in requests:
            params = {t["function"]["name"]: t["function"].get("parameters", {"type": "object"})
                      for t in req["tools"]}
            body = dict(req, tool_choice=mode, temperature=a.temperature, seed=a.seed,
                        max_tokens=a.max_tokens)
            spec = post(a.url, body)
            if "error" in spec:
                n["refused"] += 1
                print(f"  {mode}: refused: {spec['error'].get('message')}", file=sys.stderr)
                continue
            plain = post(a.url, dict(body, speculate=False))
            choice = spec["choices"][0]
            key = message_key(choice)
            n["requests"] += 1
            n["same"] += key == message_key(plain["choices"][0])
            n["drafted"] += spec["tandem"]["drafted"]
            n["accepted"] += spec["tandem"]["accepted"]
            n["stopped_after_calls"] += choice["finish_reason"] == "tool_calls"
            problems = []
            for name, args in key[1]:
                n["calls"] += 1
                try:
                    value = json.loads(args)
                except ValueError as e:
                    problems.append(f"{name}: arguments do not parse: {e}")
                    continue
                n["parsed"] += 1
                try:
                    jsonschema.validate(value, params[name], format_checker=checker)
                    n["valid"] += 1
                except (KeyError, jsonschema.ValidationError) as e:
                    problems.append(f"{name}: {e}")
            results.append({"mode": mode, "messages": req["messages"], "content": key[0],
                            "calls": key[1], "finish_reason": key[2], "problems": problems})
            for p in problems:
                print(f"  {mode}: {p}", file=sys.stderr)
        n["seconds"] = round(time.time() - t0, 1)
        rows.append((mode, n))
    print("| tool_choice | requests | refused | calls | parse | validate | stopped after calls | "
          "same with speculation off | acceptance |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mode, n in rows:
        acc = n["accepted"] / n["drafted"] if n["drafted"] else 0
        print(f"| {mode} | {n['requests']} | {n['refused']} | {n['calls']} | "
              f"{n['parsed']}/{n['calls']} | "
              f"{n['valid']}/{n['calls']} | {n['stopped_after_calls']}/{n['requests']} | "
              f"{n['same']}/{n['requests']} | {acc:.2f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"counts": dict(rows), "results": results}, f, indent=1, ensure_ascii=False)
    bad = any(n["valid"] != n["calls"] or n["same"] != n["requests"] for _, n in rows)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
