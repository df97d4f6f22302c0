"""Load on tandem serve: 32 concurrent streaming requests (completions and chat,
prompts of 5 to ~200 tokens, 8 to 96 generated tokens, some sharing a long
prefix) against one server with speculative decoding (--draft ngram) and a KV
cache far too small for all of them at once, so that the engine must preempt.
Every request must complete, and its greedy output must be identical to the same
request run alone (a second, sequential pass against the same server). After
the load, /metrics must show preemptions and no KV block in use."""
import concurrent.futures
import time

from test_server import (MODEL_NAME, ServerProcess, blocks_used, check, finish, serving,
                         stream_text)

N_REQUESTS = 32
MAX_BATCH = 8
# 28 blocks of 16 positions: room for a few requests at a time, while the
# largest single request (about 200 prompt + 96 generated tokens) still fits.
KV_TOKENS = 448

SHARED_PREFIX = ("You are a careful assistant. Answer in plain English, keep it short, and do not "
                 "use lists. The user is a programmer who wants precise, practical answers. " * 3)
TOPICS = ["hash tables", "binary search", "TCP handshakes", "garbage collection", "B-trees",
          "mutexes", "virtual memory", "HTTP caching"]


def make_requests():
    reqs = []
    for i in range(N_REQUESTS):
        topic = TOPICS[i % len(TOPICS)]
        max_tokens = [8, 24, 48, 96][i % 4]
        ignore_eos = i % 3 != 0  # most run to max_tokens, to keep the KV cache under pressure
        kind = i % 4
        if kind == 0:
            body = dict(prompt=f"{topic}:", chat=False)
        elif kind == 1:
            body = dict(prompt=SHARED_PREFIX + f"Question: what are {topic}?\nAnswer:", chat=False)
        elif kind == 2:
            body = dict(prompt=f"Explain {topic} in two sentences.", chat=True)
        else:
            body = dict(prompt=f"# Notes on {topic}\n\n" + "The main idea is that " * (1 + i % 5),
                        chat=False)
        reqs.append(dict(body, max_tokens=max_tokens, ignore_eos=ignore_eos))
    return reqs


def run_one(srv, r):
    """Stream one request greedily: (text, finish_reason, usage)."""
    common = dict(model=MODEL_NAME, max_tokens=r["max_tokens"], temperature=0, stream=True,
                  stream_options={"include_usage": True},
                  extra_body={"ignore_eos": r["ignore_eos"]})
    if r["chat"]:
        st = srv.client.chat.completions.create(
            messages=[{"role": "user", "content": r["prompt"]}], **common)
    else:
        st = srv.client.completions.create(prompt=r["prompt"], **common)
    text, chunks, final = stream_text(st, chat=r["chat"])
    usage = chunks[-1].usage
    return text, final.choices[0].finish_reason if final else None, \
        (usage.prompt_tokens, usage.completion_tokens) if usage else None


def main():
    t0 = time.time()
    with serving(ServerProcess("--draft", "ngram", "-k", 4, "--draft-always", "--max-batch", MAX_BATCH,
                               "--kv-cache-tokens", KV_TOKENS, "--ctx", 512, "--max-queue", 64,
                               "-q"), "load") as srv:
        reqs = make_requests()
        before = srv.metrics()
        with concurrent.futures.ThreadPoolExecutor(N_REQUESTS) as pool:
            futures = [pool.submit(run_one, srv, r) for r in reqs]
            concurrent_out = []
            for f in futures:
                try:
                    concurrent_out.append(f.result(timeout=300))
                except Exception as e:  # noqa: BLE001 - report any failure as a check
                    concurrent_out.append(("", f"exception: {e!r}", None))
        t1 = time.time()
        m = srv.wait_metric(lambda m: blocks_used(m) == 0 and m["tandem_requests_running"] == 0)
        check(all(o[1] in ("stop", "length") for o in concurrent_out),
              f"all {N_REQUESTS} concurrent requests completed",
              [o[1] for o in concurrent_out])
        preemptions = m["tandem_preemptions_total"] - before["tandem_preemptions_total"]
        check(preemptions > 0, "the small KV cache forced preemptions", preemptions)
        check(blocks_used(m) == 0 and m['tandem_kv_blocks_used{cache="draft"}'] == 0,
              "no KV block in use afterwards", blocks_used(m))
        check(m["tandem_requests_running"] == 0 and m["tandem_requests_queued"] == 0,
              "nothing running or queued afterwards")
        check(m["tandem_spec_drafted_tokens_total"] > 0, "speculation was active under load")
        print(f"concurrent pass: {t1 - t0:.1f} s, {preemptions:.0f} preemptions, "
              f"{m['tandem_generation_tokens_total']:.0f} tokens")

        # The same requests one at a time: no batching, no preemption.
        alone = [run_one(srv, r) for r in reqs]
        t2 = time.time()
        print(f"sequential pass: {t2 - t1:.1f} s")
        same = [a == b for a, b in zip(concurrent_out, alone)]
        for i, ok in enumerate(same):
            if not ok:
                print(f"request {i} differs:\n  concurrent {concurrent_out[i]!r}\n"
                      f"  alone      {alone[i]!r}")
        check(all(same), "each greedy output under load equals the request run alone",
              f"{same.count(False)} differ")
        # /metrics is the engine's snapshot after its last step, which may lag the
        # last response by a moment: wait for it, as after the concurrent pass.
        m2 = srv.wait_metric(lambda m: blocks_used(m) == 0)
        check(blocks_used(m2) == 0, "no KV block in use at the end")
        code = srv.stop()
        check(code == 0, "server exits 0", code)
    finish(t0, "load test passed")


if __name__ == "__main__":
    main()
