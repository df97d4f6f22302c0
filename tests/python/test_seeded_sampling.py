"""Same seed, same tokens, through the server as clients use it (the `openai`
package): a seeded sampled request gives the same text whatever the drafter
(none, n-gram, a draft model, lookups first), K (fixed or auto), tree size,
batch and thread count, on both endpoints, streamed and not, at temperatures
0.3, 0.7 and 1.0, under response_format too. A request without a seed reports
the one it drew (tandem.seed) and replays with it; the response names the
sampling mode; optimal mode is there per request; a bad mode is a 400.

SmolLM2-135M (which has no draft model of its own) runs the whole matrix with
n-gram drafting; the Qwen2.5-Coder pair (1.5B target, 0.5B draft) runs a smaller
one with the real draft model."""
import sys
import threading
import time

from test_server import (CACHE, MODEL, MODEL_NAME, ServerProcess, check, expect_error, failures,
                         finish, serving, stream_text)

QWEN = CACHE / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_DRAFT = CACHE / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"

PROMPTS = ["Write a short poem about the sea.", "List five colours and a fruit for each."]
CODE = "def merge_sorted(a, b):\n"
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}


def one(client, model, endpoint, prompt, temperature, seed, stream, max_tokens, extra=None):
    """The text (and the tandem extension of the final body or chunk) of one request."""
    body = dict(model=model, max_tokens=max_tokens, temperature=temperature, seed=seed,
                stream=stream, extra_body=extra or {})
    if endpoint == "chat":
        r = client.chat.completions.create(messages=[{"role": "user", "content": prompt}], **body)
    else:
        r = client.completions.create(prompt=prompt, **body)
    if stream:
        text, _, final = stream_text(r, chat=endpoint == "chat")
        return text, final.model_extra["tandem"]
    choice = r.choices[0]
    return (choice.message.content if endpoint == "chat" else choice.text), r.model_extra["tandem"]


def matrix(client, model, temps, max_tokens, structured=True):
    """{case: text} over endpoints, streaming, temperatures, seeds and prompts."""
    out = {}
    for endpoint in ("completions", "chat"):
        for stream in (False, True):
            for t in temps:
                for i, prompt in enumerate(PROMPTS if endpoint == "chat" else [CODE]):
                    seed = 1000 + i
                    key = (endpoint, stream, t, i)
                    out[key] = one(client, model, endpoint, prompt, t, seed, stream, max_tokens)[0]
    if structured:
        for stream in (False, True):
            extra = {"response_format": {"type": "json_schema",
                                         "json_schema": {"name": "person", "schema": SCHEMA}}}
            out[("structured", stream)] = one(client, model, "chat", "Invent a person.", 0.7, 7,
                                              stream, max_tokens, extra)[0]
    return out


def concurrently(client, model, temps, max_tokens):
    """The matrix's non-streamed completions sent all at once: batched together."""
    results, threads = {}, []
    for t in temps:
        for i, prompt in enumerate(PROMPTS):
            def run(t=t, i=i, prompt=prompt):
                results[("chat", False, t, i)] = one(client, model, "chat", prompt, t, 1000 + i,
                                                     False, max_tokens)[0]
            threads.append(threading.Thread(target=run))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return results


def compare(label, got, want):
    same = [k for k in want if got.get(k) == want[k]]
    check(len(same) == len(want), f"{label}: the same text for every seeded case "
          f"({len(same)}/{len(want)})", [(k, got.get(k), want[k]) for k in want if k not in same][:2])


def smollm2():
    temps = (0.3, 0.7, 1.0)
    n = 40
    with serving(ServerProcess("--max-batch", 4, threads=2), "plain") as srv:
        c = srv.client
        want = matrix(c, MODEL_NAME, temps, n)
        # Differs with the seed: seeds matter.
        other = one(c, MODEL_NAME, "chat", PROMPTS[0], 1.0, 5, False, n)[0]
        check(other != want[("chat", False, 1.0, 0)], "another seed gives another text")
        # No seed: one is drawn, reported, and replays the request.
        text, ext = one(c, MODEL_NAME, "chat", PROMPTS[1], 1.0, None, False, n)
        check(isinstance(ext.get("seed"), int) and 0 <= ext["seed"] < 2**63,
              "an unseeded request reports the seed it drew", ext)
        replay = one(c, MODEL_NAME, "chat", PROMPTS[1], 1.0, ext["seed"], False, n)[0]
        check(replay == text, "the reported seed replays the request", (replay, text))
        check(ext.get("sampling_mode") == "reproducible", "the default mode is reported", ext)
        _, g = one(c, MODEL_NAME, "completions", CODE, 0, 1, False, 8)
        check(g.get("sampling_mode") == "greedy", "temperature 0 reports greedy", g)
        _, o = one(c, MODEL_NAME, "completions", CODE, 0.7, 1, True, 8,
                   {"sampling_mode": "optimal"})
        check(o.get("sampling_mode") == "optimal" and o.get("seed") == 1,
              "sampling_mode optimal per request, reported in the stream", o)
        expect_error(srv, "an unknown sampling mode is a 400", "/v1/completions",
                     {"prompt": "x", "sampling_mode": "exact"}, 400, param="sampling_mode",
                     code="invalid_value")
    # --draft-always / --no-rate-guard: drafting here (sampled text, a 135M
    # model) does not pay, and the cost model or the rate guard would turn it off
    # after a few rounds; the matrix is about identical text with speculation
    # running, so it must keep running.
    setups = [
        ("n-gram k=4, one thread", ["--draft", "ngram", "-k", 4, "--draft-always"], 1),
        ("n-gram auto, trees",
         ["--draft", "ngram", "-k", "auto", "--tree", 4, "--no-rate-guard"], 2),
    ]
    for label, args, threads in setups:
        with serving(ServerProcess("--max-batch", 4, *args, threads=threads), label) as srv:
            got = matrix(srv.client, MODEL_NAME, temps, n)
            compare(label, got, want)
            batched = concurrently(srv.client, MODEL_NAME, temps, n)
            compare(label + ", batched", batched, {k: want[k] for k in batched})
            check_drafted(srv, label)


def check_drafted(srv, label):
    """Speculation ran while the compared texts were written: the server's
    drafted-token counter covers every request above (with -k auto the policy
    may rightly stop drafting a sampled text later on, so one request after
    them would not tell)."""
    drafted = srv.metrics()["tandem_spec_drafted_tokens_total"]
    check(drafted > 0, f"{label}: speculation ran ({drafted:.0f} tokens drafted)", drafted)


def qwen_pair():
    if not QWEN.exists() or not QWEN_DRAFT.exists():
        print("skip: the Qwen2.5-Coder pair is not in the cache")
        return
    name = QWEN.stem
    temps = (0.7,)
    n = 24
    with serving(ServerProcess("--max-batch", 2, model=QWEN, startup_timeout=180),
                 "qwen plain") as srv:
        want = matrix(srv.client, name, temps, n, structured=False)
    # Lookups first is the default with a draft model; the first setup turns it off so that
    # the model's own drafts are checked too.
    setups = [("auto K, trees, model drafts only, one thread",
               ["-k", "auto", "--tree", 4, "--no-rate-guard", "--no-draft-lookup"], 1),
              ("K=4, lookups first, two threads", ["-k", 4, "--draft-lookup", "--draft-always"],
               2)]
    for label, args, threads in setups:
        label = "Qwen2.5-Coder 1.5B with the 0.5B draft, " + label
        with serving(ServerProcess("--max-batch", 2, "-d", QWEN_DRAFT, *args, model=QWEN,
                                   threads=threads, startup_timeout=180), label) as srv:
            got = matrix(srv.client, name, temps, n, structured=False)
            compare(label, got, want)
            if threads == 2:
                batched = concurrently(srv.client, name, temps, n)
                compare(label + ", batched", batched, {k: want[k] for k in batched})
            check_drafted(srv, label)


def main():
    t_start = time.time()
    smollm2()
    qwen_pair()
    finish(t_start, "seeded sampling gives the same tokens in every configuration")


if __name__ == "__main__":
    sys.exit(main())
