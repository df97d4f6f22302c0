"""`tandem bench serve` (SmolLM2-135M, n-gram drafting, greedy): a short run at two
concurrencies and two reps, in both ways a level can end (--seconds, with the batch
kept full, and --requests, draining it), and with a draft model; its JSON checked for every level: plain and
speculative paired per rep, each mode's level its steps within --seconds, tokens
and finished requests counted in them, the greedy outputs compared and identical, the
speedups (pooled and per rep) consistent with the levels' rates; and clear errors for
bad options. No timing thresholds: performance lives in docs/benchmarks.md."""
import json
import os
import subprocess
import time

from test_server import MODEL, TANDEM, check, finish

SOURCE = os.environ.get("TANDEM_SOURCE_DIR", ".")
LEVELS, REPS, MAX_TOKENS = [1, 3], 2, 12


def run(*extra, levels=",".join(map(str, LEVELS)), draft="ngram", timeout=600):
    cmd = [TANDEM, "bench", "serve", "-m", str(MODEL), "-d", draft, "-n", str(MAX_TOKENS),
           "--concurrency", levels, "--reps", str(REPS),
           "--prompts", os.path.join(SOURCE, "prompts", "chat.jsonl"),
           "--prefix-requests", "2", "--system-tokens", "64", *map(str, extra)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    data = None
    if p.returncode == 0:
        data = json.loads(p.stdout.strip().splitlines()[-1])
    return p, data


def check_levels(label, data, seconds=None, requests=None):
    levels = data["levels"]
    check(len(levels) == 2 * len(LEVELS) * REPS, f"{label}: a plain and a spec row per level "
          "and rep", len(levels))
    for c in LEVELS:
        for rep in range(REPS):
            rows = {L["mode"]: L for L in levels if L["concurrency"] == c and L["rep"] == rep}
            check(set(rows) == {"plain", "spec"}, f"{label} c={c} rep {rep}: both modes", rows)
            if set(rows) != {"plain", "spec"}:
                continue
            plain, spec = rows["plain"], rows["spec"]
            for L in (plain, spec):
                tag = f"{label} c={c} rep {rep} {L['mode']}"
                check(L["generated_tokens"] > 0 and L["seconds"] > 0, f"{tag}: tokens and time",
                      (L["generated_tokens"], L["seconds"]))
                check(abs(L["tok_per_s"] - L["generated_tokens"] / L["seconds"]) < 1e-6 *
                      L["tok_per_s"] + 1e-9, f"{tag}: tok/s = tokens / seconds")
                if seconds is not None:
                    # Each mode steps until its own clock passes --seconds; its
                    # level is exactly those seconds, the crossing step's tokens
                    # counted pro rata (its clock is in ms: 1e-9 is rounding).
                    check(abs(L["seconds"] - seconds) < 1e-9,
                          f"{tag}: its level is exactly --seconds of steps", L["seconds"])
                    check(L["generated_tokens"] >= L["requests"],
                          f"{tag}: finished requests' tokens, plus the running ones'")
                    check(L["generated_tokens"] <= (L["requests"] + c) * MAX_TOKENS,
                          f"{tag}: no more tokens than the requests finished in the "
                          "level and those running at its end",
                          (L["generated_tokens"], L["requests"]))
                if L["mode"] == "plain":
                    check(L["drafted_tokens"] == 0, f"{tag}: plain drafts nothing",
                          L["drafted_tokens"])
                if requests is not None:
                    # Every request finished: the engine's count of drafted tokens
                    # and the requests' drafting rounds tell the same story.
                    check((L["drafted_tokens"] > 0) == (L["request_drafting_rounds"] > 0),
                          f"{tag}: drafted tokens where requests had drafting rounds",
                          (L["drafted_tokens"], L["request_drafting_rounds"]))
                    check(L["requests"] == requests and
                          L["generated_tokens"] <= requests * MAX_TOKENS,
                          f"{tag}: {requests} requests of at most {MAX_TOKENS} tokens",
                          (L["requests"], L["generated_tokens"]))
                check(0 < L["ttft_ms_p50"] <= L["ttft_ms_p99"], f"{tag}: TTFT percentiles",
                      (L["ttft_ms_p50"], L["ttft_ms_p99"]))
            # Outputs are compared where a request finished in both modes: with
            # --requests every one did; with --seconds at concurrency 1 requests
            # finish in order, so the first finished in both if each mode
            # finished one (at 3 the two modes may finish different ones first,
            # and a slow build, as under a sanitizer, may finish none).
            if requests is not None:
                want = requests
            elif c == 1 and min(plain["requests"], spec["requests"]) >= 1:
                want = min(plain["requests"], spec["requests"])
            else:
                want = 0
            check(spec.get("outputs_identical") is True and spec["outputs_compared"] >= want,
                  f"{label} c={c} rep {rep}: greedy outputs identical, at least {want} compared",
                  (spec.get("outputs_identical"), spec.get("outputs_compared")))
            ratio = spec["tok_per_s"] / plain["tok_per_s"]
            got = data["spec_speedup_per_rep"][str(c)][rep]
            check(abs(got - ratio) < 1e-9, f"{label} c={c} rep {rep}: the per-rep speedup",
                  (got, ratio))
        rows = [L for L in levels if L["concurrency"] == c]
        pooled = (sum(L["generated_tokens"] for L in rows if L["mode"] == "spec") /
                  sum(L["seconds"] for L in rows if L["mode"] == "spec")) / \
                 (sum(L["generated_tokens"] for L in rows if L["mode"] == "plain") /
                  sum(L["seconds"] for L in rows if L["mode"] == "plain"))
        check(abs(data["spec_speedup"][str(c)] - pooled) < 1e-9,
              f"{label} c={c}: the pooled speedup", (data["spec_speedup"][str(c)], pooled))


def main():
    t_start = time.time()
    p, data = run("--seconds", "1")
    check(p.returncode == 0, "bench serve --seconds runs", p.stderr[-2000:])
    if data:
        check_levels("--seconds", data, seconds=1)
        check(data["lookup"] == "none", "no lookups in front of the n-gram drafter",
              data["lookup"])
        check(data["prefix_cache"]["prefill_ms_with"] < data["prefix_cache"]["prefill_ms_without"],
              "the prefix cache saves prefill", data["prefix_cache"])
        check("speculative / plain tokens/s:" in p.stdout, "the summary line is printed")

    p, data = run("--requests", "4")
    check(p.returncode == 0, "bench serve --requests runs", p.stderr[-2000:])
    if data:
        check_levels("--requests", data, requests=4)

    # A draft model (the target itself): the drafter's model lives as long as its
    # engine.
    p, data = run("--seconds", "1", draft=str(MODEL))
    check(p.returncode == 0, "bench serve with a draft model runs", p.stderr[-2000:])
    if data:
        check_levels("draft model", data, seconds=1)
        check(data["lookup"] == "ngram", "a draft model has lookups first by default",
              data["lookup"])
        check("lookups first: ngram" in p.stdout, "the header says so", p.stdout[:300])
    p, data = run("--seconds", "1", "--no-draft-lookup", draft=str(MODEL),
                  levels="1")
    check(p.returncode == 0, "bench serve --no-draft-lookup runs", p.stderr[-2000:])
    if data:
        check(data["lookup"] == "none", "--no-draft-lookup: the draft model alone", data["lookup"])

    for levels, says in (("0", "--concurrency: 0 is outside [1, 256]"),
                         ("1,two", "--concurrency: 'two' is not a number")):
        p, _ = run(levels=levels, timeout=120)
        check(p.returncode != 0 and says in p.stderr, f"--concurrency {levels}: a clear error",
              (p.returncode, p.stderr[-300:]))
    for bad in (["--seconds", "0"], ["--requests", "-1"]):
        p, _ = run(*bad, timeout=120)
        check(p.returncode != 0 and bad[0] in p.stderr and bad[1] in p.stderr,
              f"{' '.join(bad)}: a clear error naming the option and value",
              (p.returncode, p.stderr[-300:]))
    finish(t_start, "bench serve checks passed")


if __name__ == "__main__":
    main()
