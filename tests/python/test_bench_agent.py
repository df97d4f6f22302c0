"""`tandem bench agent` against tandem serve (SmolLM2-135M, --draft suffix, two
API keys): a short run of the scripted agent sessions with tool turns as text
(--no-tools), its JSON checked for every per-turn field with sensible values
(prompts that grow turn by turn, cached prompt tokens from turn 2 on, token
counts within max_tokens, the same greedy text with speculation and without), the same sessions through --llama-server (pointed
at tandem itself: the generic OpenAI path), the sessions with OpenAI tool
messages (on SmolLM2 refused with a hint to use --no-tools, since its template
cannot express tools; answered on Qwen2.5-Coder-0.5B), and clear errors for a
server that is not there or a wrong key. No timing thresholds: performance lives in docs/benchmarks.md."""
import json
import os
import subprocess
import sys
import tempfile
import time

from test_server import MODEL, TANDEM, ServerProcess, check, finish, serving

SOURCE = os.environ.get("TANDEM_SOURCE_DIR", ".")
KEYS = ["tk-agent-a", "tk-agent-b"]
TURNS, MAX_TOKENS, SESSIONS = 3, 12, 2


def bench(base, *extra, sessions=SESSIONS, timeout=600):
    out = tempfile.NamedTemporaryFile(prefix="bench-agent-", suffix=".json", delete=False).name
    cmd = [TANDEM, "bench", "agent", "--url", base, "--api-key", KEYS[0], "--repo", SOURCE,
           "--context", "", "--sessions", str(sessions), "--turns", str(TURNS),
           "-n", str(MAX_TOKENS), "--json", out, *map(str, extra)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    data = None
    if p.returncode == 0:
        with open(out) as f:
            data = json.load(f)
    os.unlink(out)
    return p, data


def check_pass(label, turns, cold):
    check(len(turns) == TURNS, f"{label}: {TURNS} turns", len(turns))
    fields = {"turn", "prompt_tokens", "cached_tokens", "completion_tokens", "ttft_ms",
              "decode_ms", "decode_tok_s", "total_ms", "tool_calls", "finish_reason"}
    for t in turns:
        check(fields <= set(t), f"{label} turn {t.get('turn')}: every field", sorted(t))
        check(t["prompt_tokens"] > 0 and 0 <= t["cached_tokens"] <= t["prompt_tokens"],
              f"{label} turn {t['turn']}: 0 <= cached <= prompt tokens",
              (t["cached_tokens"], t["prompt_tokens"]))
        # A model may end a turn at once (Qwen does after some tool results).
        check(0 <= t["completion_tokens"] <= MAX_TOKENS,
              f"{label} turn {t['turn']}: 0..{MAX_TOKENS} tokens", t["completion_tokens"])
        check(t["ttft_ms"] > 0 and t["total_ms"] >= t["ttft_ms"] and t["decode_ms"] >= 0,
              f"{label} turn {t['turn']}: times in order", (t["ttft_ms"], t["total_ms"]))
        check(t["decode_tok_s"] >= 0, f"{label} turn {t['turn']}: decode rate", t["decode_tok_s"])
        check(t["finish_reason"] in ("stop", "length", "tool_calls"),
              f"{label} turn {t['turn']}: finish reason", t["finish_reason"])
    check(any(t["completion_tokens"] > 0 for t in turns), f"{label}: some turn wrote tokens")
    prompts = [t["prompt_tokens"] for t in turns]
    check(prompts == sorted(prompts) and len(set(prompts)) == len(prompts),
          f"{label}: each turn resends a longer conversation", prompts)
    if cold:
        check(turns[0]["cached_tokens"] < turns[0]["prompt_tokens"] // 2,
              f"{label}: turn 1 is not served from another session's cache", turns[0])
    else:
        check(turns[0]["cached_tokens"] >= turns[0]["prompt_tokens"] // 2,
              f"{label}: turn 1 is served from the cache the speculative pass filled", turns[0])
    for t in turns[1:]:
        check(t["cached_tokens"] >= turns[0]["prompt_tokens"] // 2,
              f"{label} turn {t['turn']}: the earlier turns' prompt is cached",
              (t["cached_tokens"], turns[0]["prompt_tokens"]))


def check_result(label, data, passes):
    check(data["turns"] == TURNS, f"{label}: the run's settings")
    check(len(data["per_session"]) == data["sessions"], f"{label}: every session reported")
    for s in data["per_session"]:
        for p in passes:
            check(p in s, f"{label} session {s['session']}: pass {p}", sorted(s))
            if p in s:
                check_pass(f"{label} session {s['session']} {p}", s[p], p == "speculative")
    summary = data["summary"]
    for p in passes:
        sp = summary[p]
        check(sp["ttft_turn1_ms"] > 0 and sp["ttft_later_fraction_mean"] > 0
              and sp["ttft_later_fraction_max"] >= sp["ttft_later_fraction_mean"]
              and 0 < sp["cached_fraction_later"] <= 1 and sp["decode_tok_s"] > 0,
              f"{label}: summary of {p}", sp)
    check(summary["decode_speedup"] > 0, f"{label}: decode speedup reported", summary)
    check(summary["greedy_mismatches"] == 0, f"{label}: the same greedy text with speculation",
          summary["greedy_mismatches"])


def main():
    t_start = time.time()
    with serving(ServerProcess("--api-key", ",".join(KEYS), "-d", "suffix", "-k", "auto",
                               "--max-batch", 2, "-q"), "bench agent") as srv:
        p, data = bench(srv.base, "--no-tools", "--llama-server", srv.base, "--llama-api-key",
                        KEYS[1])
        check(p.returncode == 0, "bench agent --no-tools runs", p.stderr[-2000:])
        if data:
            check(not data["tools"], "--no-tools is reported")
            check_result("--no-tools", data, ["speculative", "plain", "llama-server"])
            last = p.stdout.strip().splitlines()[-1]
            check(json.loads(last)["summary"] == data["summary"],
                  "the last line of stdout is the JSON result")
            check("from turn 2 on" in p.stdout, "the table's summary is printed")

        # OpenAI tool messages: answered where the template can express tools,
        # otherwise a clear refusal that names the way out.
        p, data = bench(srv.base, sessions=1)
        if p.returncode == 0:
            check(data["tools"], "tool messages are reported")
        else:
            check("--no-tools" in p.stderr and "turn 1" in p.stderr,
                  "a server that refuses tools: the error says so and suggests --no-tools",
                  p.stderr[-1000:])

        p, _ = bench(srv.base.replace(str(srv.port), "1"), "--no-tools")
        check(p.returncode != 0 and "no healthy server" in p.stderr,
              "a URL with no server: a clear error", p.stderr[-500:])
        p = subprocess.run([TANDEM, "bench", "agent", "--url", srv.base, "--api-key", "tk-wrong",
                            "--no-tools", "--context", "", "--repo", SOURCE, "--turns", "1"],
                           capture_output=True, text=True, timeout=120)
        check(p.returncode != 0 and "401" in p.stderr, "a wrong key: the server's 401 shown",
              p.stderr[-500:])
        check(srv.stop() == 0, "server exits 0")

    # A model whose template expresses tools (Qwen2.5-Coder-0.5B): the sessions
    # as OpenAI tool messages, answered.
    qwen = MODEL.parent / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    if qwen.exists():
        with serving(ServerProcess("--api-key", KEYS[0], "-d", "suffix", "-q", model=qwen),
                     "bench agent, tools") as srv:
            p, data = bench(srv.base, sessions=1)
            check(p.returncode == 0, "bench agent with tool messages runs", p.stderr[-2000:])
            if data:
                check(data["tools"], "tool messages are reported")
                check_result("tools", data, ["speculative", "plain"])
            check(srv.stop() == 0, "server exits 0")
    else:
        print(f"skipped the tool-message run: {qwen} is missing")
    finish(t_start, "bench agent checks passed")


if __name__ == "__main__":
    main()
