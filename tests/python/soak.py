"""Soak test of tandem serve: SmolLM2-135M with n-gram speculation (-k auto)
under mixed load for a set time, with a KV cache small enough to force
preemption. Workers (threads, each with its own seeded choices) send:
  greedy completions and chats, streamed and not, from prompts that share
  prefixes, some with log-probabilities and one constrained to a JSON schema:
  each response must equal the same request run alone (measured before the
  load), and a constrained one that stops must be JSON;
  sampled requests (temperature 0.8, top_p 0.95): must finish normally;
  streams whose client disconnects after a few chunks;
  malformed requests (invalid or deeply nested JSON, wrong types, unsupported
  options or schemas, an unknown model, a body over the limit, a prompt over the
  context, an unknown path): each must get its 4xx error object.
Every --pause-every seconds the load stops until the server is idle, and the
KV blocks in use must be back to 0. What is judged is the server's heap in use
(tandem_heap_bytes_in_use: what malloc has handed out and not had back, where a
leak grows) at the idle pauses after warm-up, when the server holds no
request's memory: the median of its growth per minute from one pause to the
next. A leak grows it at every pause; a buffer reaching a new largest shape (a
batch's logits at a new batch size and draft length: tens of MB) grows it once,
which a least-squares slope over a few minutes mistook for a leak. The resident set is sampled
every 2 s and at each pause and reported beside it, whole, anonymous (RssAnon)
and file-backed (RssFile), not judged: it also holds what the allocator keeps
after frees, which moves in steps of tens of MB as the heap settles.

Pass: requests complete, the server never crashes and exits 0 on SIGTERM, no
request fails unexpectedly (5xx, a dropped connection, a wrong status), every
greedy response equals its solo run, KV blocks return to 0 at each pause and at
the end, at least --min-preemptions preemptions happened, and the heap in use
grows by at most --max-heap-slope MB/min between idle pauses after warm-up (the
median). Figures (requests by kind, errors by kind, latency percentiles, RSS)
are printed and, with --json, written to a file.

  soak.py [--minutes 30] [--workers 8] [--threads 2] [--json OUT] [--seed 1]"""
import argparse
import http.client
import json
import math
import random
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_server import ServerProcess, parse_metrics  # noqa: E402

COMPLETION = "/v1/completions"
CHAT = "/v1/chat/completions"
MAX_BODY = 200_000
CTX = 512

SHARED = ("You are a careful assistant. Answer plainly and briefly. The reader is a programmer "
          "who wants practical answers without lists. ")
TOPICS = ["hash tables", "binary search", "TCP handshakes", "garbage collection", "B-trees",
          "mutexes", "virtual memory", "HTTP caching", "bloom filters", "consensus"]


def greedy_cases():
    """The greedy requests whose outputs are checked: (endpoint, body without stream)."""
    cases = []
    for i, topic in enumerate(TOPICS):
        n = [8, 24, 48, 80][i % 4]
        if i % 3 == 0:
            cases.append((COMPLETION, {"prompt": SHARED + f"Question: what are {topic}?\nAnswer:",
                                       "max_tokens": n, "ignore_eos": True}))
        elif i % 3 == 1:
            cases.append((CHAT, {"messages": [{"role": "system", "content": SHARED},
                                              {"role": "user", "content": f"Explain {topic}."}],
                                 "max_tokens": n}))
        else:
            cases.append((COMPLETION, {"prompt": f"# Notes on {topic}\n\nThe main idea is that "
                                       * (1 + i % 4), "max_tokens": n, "stop": ["\n\n\n"]}))
    # Log-probabilities (both endpoints' shapes) and a schema-constrained answer
    # take the engine's other paths under the same load.
    cases.append((CHAT, {"messages": [{"role": "system", "content": SHARED},
                                      {"role": "user", "content": "Explain hash tables."}],
                         "max_tokens": 32, "logprobs": True, "top_logprobs": 3}))
    cases.append((COMPLETION, {"prompt": SHARED + "Question: what are B-trees?\nAnswer:",
                               "max_tokens": 24, "ignore_eos": True, "logprobs": 2}))
    cases.append((CHAT, {"messages": [{"role": "user", "content": "Name a sorting algorithm "
                                       "and the year it was published, as JSON."}],
                         "max_tokens": 64, "response_format": {
                             "type": "json_schema", "json_schema": {"name": "algorithm", "schema": {
                                 "type": "object", "required": ["name", "year"], "properties": {
                                     "name": {"type": "string", "maxLength": 30},
                                     "year": {"type": "integer", "minimum": 1900,
                                              "maximum": 2030}}}}}}))
    for c in cases:
        c[1]["temperature"] = 0
    return cases


MALFORMED = [
    ("invalid_json", COMPLETION, '{"prompt": "x", ', 400),
    ("deep_json", COMPLETION, "[" * 50_000, 400),
    ("wrong_type", COMPLETION, json.dumps({"prompt": "x", "max_tokens": "ten"}), 400),
    ("negative_temperature", CHAT, json.dumps({"messages": [{"role": "user", "content": "x"}],
                                               "temperature": -1}), 400),
    ("n_2", COMPLETION, json.dumps({"prompt": "x", "n": 2}), 400),
    ("top_logprobs_21", CHAT, json.dumps({"messages": [{"role": "user", "content": "x"}],
                                          "logprobs": True, "top_logprobs": 21}), 400),
    ("unsupported_schema", CHAT, json.dumps({
        "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema",
                            "json_schema": {"name": "s", "schema": {"not": {"type": "null"}}}}}),
     400),
    ("unknown_model", COMPLETION, json.dumps({"prompt": "x", "model": "gpt-9"}), 404),
    ("empty_messages", CHAT, json.dumps({"messages": []}), 400),
    ("too_long", COMPLETION, json.dumps({"prompt": "word " * 2000}), 400),
    ("too_large", COMPLETION, json.dumps({"prompt": "x" * (MAX_BODY + 10)}), 413),
    ("bad_path", "/v1/nothing", "{}", 404),
]


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.served = {}       # kind -> count of requests that behaved
        self.errors = {}       # unexpected failures by kind
        self.latency = {}      # kind -> [seconds]
        self.ttft = []
        self.mismatches = []

    def ok(self, kind, seconds=None):
        with self.lock:
            self.served[kind] = self.served.get(kind, 0) + 1
            if seconds is not None:
                self.latency.setdefault(kind, []).append(seconds)

    def error(self, kind, detail):
        with self.lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1
            if self.errors[kind] <= 3:
                print(f"unexpected: {kind}: {detail}", flush=True)


def post(host, port, path, body, timeout=300):
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def text_of(endpoint, data):
    ch = data["choices"][0]
    return ch["message"]["content"] if endpoint == CHAT else ch["text"]


def stream(host, port, endpoint, body, stop_after=None, timeout=300):
    """A streamed request: (status, text, finish_reason, seconds to first text). With
    stop_after, the connection is dropped after that many events."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    t0 = time.time()
    conn.request("POST", endpoint, body=json.dumps({**body, "stream": True}),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        r.read()
        conn.close()
        return r.status, "", None, None
    text, finish, ttft, events = "", None, None, 0
    for raw in r:
        line = raw.decode("utf-8").strip()
        if not line.startswith("data: "):
            continue
        payload = line[6:]
        if payload == "[DONE]":
            break
        events += 1
        ev = json.loads(payload)
        if "error" in ev:
            finish = "error: " + ev["error"]["message"]
            continue
        for ch in ev.get("choices", []):
            piece = (ch.get("delta", {}).get("content") if endpoint == CHAT else ch.get("text"))
            if piece:
                if ttft is None:
                    ttft = time.time() - t0
                text += piece
            finish = ch.get("finish_reason") or finish
        if stop_after is not None and events >= stop_after:
            conn.sock.shutdown(socket.SHUT_RDWR)
            break
    conn.close()
    return 200, text, finish, ttft


class Soak:
    def __init__(self, srv, args):
        self.srv, self.args = srv, args
        self.host, self.port = srv.host, srv.port
        self.stats = Stats()
        self.cases = greedy_cases()
        self.reference = []
        self.running = threading.Event()   # set while workers may send
        self.stop = threading.Event()
        self.in_flight = 0
        self.in_flight_lock = threading.Condition()

    def solo_references(self):
        for endpoint, body in self.cases:
            status, text = post(self.host, self.port, endpoint, json.dumps(body))
            assert status == 200, (status, text)
            self.reference.append(text_of(endpoint, json.loads(text)))

    def one_request(self, rng):
        kind = rng.choices(["greedy", "greedy_stream", "sampled", "sampled_stream", "disconnect",
                            "malformed"], weights=[3, 3, 2, 2, 1, 1])[0]
        t0 = time.time()
        if kind in ("greedy", "greedy_stream"):
            i = rng.randrange(len(self.cases))
            endpoint, body = self.cases[i]
            choice = None
            if kind == "greedy":
                status, raw = post(self.host, self.port, endpoint, json.dumps(body))
                choice = json.loads(raw)["choices"][0] if status == 200 else None
                text = text_of(endpoint, {"choices": [choice]}) if choice else raw
                finish = choice["finish_reason"] if choice else None
            else:
                status, text, finish, ttft = stream(self.host, self.port, endpoint, body)
                if ttft is not None:
                    with self.stats.lock:
                        self.stats.ttft.append(ttft)
            if status != 200 or finish not in ("ok", "stop", "length"):
                self.stats.error(kind, (status, finish, text[:200]))
            elif text != self.reference[i]:
                with self.stats.lock:
                    self.stats.mismatches.append((i, kind, text, self.reference[i]))
                self.stats.error("greedy_mismatch", f"case {i} ({kind})")
            elif "response_format" in body and finish == "stop" and not is_json(text):
                self.stats.error("schema_output_not_json", f"case {i} ({kind}): {text[:200]!r}")
            elif choice and "logprobs" in body and not choice.get("logprobs"):
                self.stats.error("logprobs_missing", f"case {i} ({kind})")
            else:
                self.stats.ok(kind, time.time() - t0)
        elif kind in ("sampled", "sampled_stream"):
            endpoint, body = self.cases[rng.randrange(len(self.cases))]
            body = {**body, "temperature": 0.8, "top_p": 0.95, "seed": rng.randrange(1 << 30)}
            if kind == "sampled":
                status, raw = post(self.host, self.port, endpoint, json.dumps(body))
                finish = json.loads(raw)["choices"][0]["finish_reason"] if status == 200 else None
            else:
                status, _, finish, _ = stream(self.host, self.port, endpoint, body)
            if status == 200 and finish in ("stop", "length"):
                self.stats.ok(kind, time.time() - t0)
            else:
                self.stats.error(kind, (status, finish))
        elif kind == "disconnect":
            endpoint, body = self.cases[rng.randrange(len(self.cases))]
            body = {**body, "max_tokens": 200}
            if "response_format" not in body:  # a constrained answer ends at its document's end
                body["ignore_eos"] = True
            status, _, _, _ = stream(self.host, self.port, endpoint, body,
                                     stop_after=rng.randrange(1, 4))
            if status == 200:
                self.stats.ok(kind)
            else:
                self.stats.error(kind, status)
        else:
            name, path, body, want = MALFORMED[rng.randrange(len(MALFORMED))]
            try:
                status, raw = post(self.host, self.port, path, body)
                err = json.loads(raw).get("error", {})
                good = status == want and err.get("message")
            except (OSError, http.client.HTTPException, ValueError) as e:
                # The server closes a connection whose oversized body it will not read;
                # the client may see that before the 413 it was sent.
                good, status = name == "too_large", repr(e)
            if good:
                self.stats.ok("malformed_" + name)
            else:
                self.stats.error("malformed_" + name, status)

    def worker(self, index):
        rng = random.Random(self.args.seed * 1000 + index)
        while not self.stop.is_set():
            with self.in_flight_lock:  # checked and counted at once: pauses see every request
                if not self.running.is_set():
                    self.in_flight_lock.wait(0.2)
                    continue
                self.in_flight += 1
            try:
                self.one_request(rng)
            except Exception as e:  # noqa: BLE001 - every failure is counted and shown
                self.stats.error("exception", repr(e))
            finally:
                with self.in_flight_lock:
                    self.in_flight -= 1
                    self.in_flight_lock.notify_all()

    def metrics(self):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        return parse_metrics(text)

    def memory_mb(self):
        """The server's resident memory in MB: (VmRSS, RssAnon, RssFile)."""
        fields = {}
        for line in Path(f"/proc/{self.srv.proc.pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon", "RssFile"):
                fields[name] = int(value.split()[0]) / 1024
        return tuple(fields.get(k, float("nan")) for k in ("VmRSS", "RssAnon", "RssFile"))

    def pause_and_check_idle(self, label):
        """Stop the workers, wait for the server to be idle, check the KV blocks."""
        with self.in_flight_lock:
            self.running.clear()
            self.in_flight_lock.wait_for(lambda: self.in_flight == 0, timeout=600)
        deadline = time.time() + 30
        while True:
            m = self.metrics()
            used = (m['tandem_kv_blocks_used{cache="target"}'],
                    m.get('tandem_kv_blocks_used{cache="draft"}', 0.0))
            if (used == (0, 0) and m["tandem_requests_running"] == 0
                    and m["tandem_requests_queued"] == 0) or time.time() > deadline:
                break
            time.sleep(0.1)
        ok = used == (0, 0)
        if not ok:
            self.stats.error("kv_blocks_not_freed", f"{label}: {used}")
        return ok, m

    def run(self):
        args = self.args
        t_start = time.time()
        self.solo_references()
        threads = [threading.Thread(target=self.worker, args=(i,), daemon=True)
                   for i in range(args.workers)]
        for t in threads:
            t.start()
        rss, idle_rss, pauses = [], [], 0
        end = t_start + args.minutes * 60
        next_pause = time.time() + args.pause_every
        self.running.set()
        while time.time() < end:
            time.sleep(2)
            if self.srv.proc.poll() is not None:
                self.stats.error("server_crash", f"exit code {self.srv.proc.returncode}")
                break
            rss.append((time.time() - t_start, *self.memory_mb()))
            if time.time() >= next_pause and time.time() < end - args.pause_every / 2:
                ok, idle_m = self.pause_and_check_idle(f"pause {pauses + 1}")
                idle_rss.append((time.time() - t_start, *self.memory_mb(), heap_mb(idle_m)))
                pauses += 1
                print(f"[{(time.time() - t_start) / 60:5.1f} min] pause {pauses}: KV blocks "
                      f"{'free' if ok else 'NOT FREE'}, heap in use {idle_rss[-1][4]:.1f} MB, "
                      f"RSS {idle_rss[-1][1]:.1f} MB (anonymous {idle_rss[-1][2]:.1f}, "
                      f"file {idle_rss[-1][3]:.1f}), "
                      f"served {sum(self.stats.served.values())}", flush=True)
                with self.in_flight_lock:
                    self.running.set()
                    self.in_flight_lock.notify_all()
                next_pause = time.time() + args.pause_every
        ok, m = self.pause_and_check_idle("end")
        idle_rss.append((time.time() - t_start, *self.memory_mb(), heap_mb(m)))
        self.stop.set()
        for t in threads:
            t.join(60)
        return self.report(t_start, rss, idle_rss, pauses, m)

    def report(self, t_start, rss, idle_rss, pauses, m):
        args, st = self.args, self.stats
        # Samples are (t, VmRSS, RssAnon, RssFile[, heap in use]); column c's slope
        # in MB/min.
        def slope_of(samples, c):
            points = [(s[0], s[c]) for s in samples]
            return fit_slope(points) * 60 if len(points) >= 3 else float("nan")
        warm = [s for s in rss if s[0] >= args.warmup_minutes * 60]
        idle_warm = [s for s in idle_rss if s[0] >= args.warmup_minutes * 60]
        # The judged figure: the median growth per minute between idle pauses.
        growth = [(b[4] - a[4]) / ((b[0] - a[0]) / 60) for a, b in zip(idle_warm, idle_warm[1:])]
        slope = statistics.median(growth) if growth else float("nan")
        heap_known = not any(math.isnan(s[4]) for s in idle_rss)
        lat = {k: percentiles(v) for k, v in st.latency.items()}
        all_lat = [x for v in st.latency.values() for x in v]
        code = self.srv.stop()
        preemptions = m["tandem_preemptions_total"]
        figures = {
            "minutes": args.minutes, "workers": args.workers,
            "requests_served": sum(st.served.values()), "served_by_kind": st.served,
            "unexpected_errors_by_kind": st.errors,
            "greedy_mismatches": len(st.mismatches),
            "rss_mb_start": rss[0][1] if rss else None, "rss_mb_end": rss[-1][1] if rss else None,
            "anon_rss_mb_start": rss[0][2] if rss else None,
            "anon_rss_mb_end": rss[-1][2] if rss else None,
            "file_rss_mb_start": rss[0][3] if rss else None,
            "file_rss_mb_end": rss[-1][3] if rss else None,
            "warmup_minutes": args.warmup_minutes,
            "idle_minutes": [round(s[0] / 60, 2) for s in idle_rss],
            "idle_rss_mb": [round(s[1], 1) for s in idle_rss],
            "idle_anon_rss_mb": [round(s[2], 1) for s in idle_rss],
            "idle_heap_in_use_mb": [round(s[4], 2) for s in idle_rss],
            "idle_heap_growth_mb_per_min_after_warmup": [round(g, 2) for g in growth],
            "idle_heap_growth_median_mb_per_min": slope,
            "idle_heap_slope_mb_per_min_after_warmup": slope_of(idle_warm, 4),
            "idle_anon_rss_slope_mb_per_min_after_warmup": slope_of(idle_warm, 2),
            "anon_rss_slope_under_load_mb_per_min_after_warmup": slope_of(warm, 2),
            "rss_slope_under_load_mb_per_min_after_warmup": slope_of(warm, 1),
            "file_rss_slope_under_load_mb_per_min_after_warmup": slope_of(warm, 3),
            "latency_s_all": percentiles(all_lat), "latency_s_by_kind": lat,
            "ttft_s_streams": percentiles(st.ttft),
            "preemptions": preemptions, "pauses_with_kv_checked": pauses + 1,
            "generated_tokens": m["tandem_generation_tokens_total"],
            "spec_drafted": m["tandem_spec_drafted_tokens_total"],
            "spec_accepted": m["tandem_spec_accepted_tokens_total"],
            "client_disconnects": m["tandem_client_disconnects_total"],
            "rejected_by_reason": {k: v for k, v in m.items()
                                   if k.startswith("tandem_requests_rejected_total")},
            "server_exit_code": code,
        }
        print(json.dumps(figures, indent=1))
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
        for i, kind, got, want in st.mismatches[:3]:
            print(f"mismatch case {i} ({kind}):\n  got  {got!r}\n  want {want!r}")
        failures = []
        if figures["latency_s_all"]["n"] == 0:
            failures.append(f"no request completed in {args.minutes} minutes")
        if st.errors:
            failures.append(f"unexpected errors {st.errors}")
        if code != 0:
            failures.append(f"server exit code {code}")
        if preemptions < args.min_preemptions:
            failures.append(f"{preemptions:.0f} preemptions, fewer than {args.min_preemptions}")
        judged = args.max_heap_slope < 1e9  # (TSan runs pass 1e9: its allocator hides the heap)
        if judged and not heap_known:
            failures.append("the server's /metrics has no tandem_heap_bytes_in_use")
        elif judged and len(growth) < 3:
            failures.append(f"{len(idle_warm)} idle pauses after the {args.warmup_minutes}-minute "
                            "warm-up: too few to judge the heap's growth (run longer, or pause "
                            "more often)")
        elif judged and not (slope <= args.max_heap_slope):
            failures.append(f"the heap in use grew a median {slope:.2f} MB/min between idle "
                            f"pauses, over {args.max_heap_slope}")
        if failures:
            print("SOAK FAILED: " + "; ".join(failures))
            return 1
        print(f"soak passed: {figures['requests_served']} requests in {args.minutes} min, "
              f"heap growth between idle pauses a median {slope:+.2f} MB/min, "
              f"p99 {figures['latency_s_all']['p99']:.2f} s")
        return 0


def is_json(text):
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def heap_mb(metrics):
    """The server's heap in use in MB from a /metrics scrape, NaN where absent."""
    return metrics.get("tandem_heap_bytes_in_use", float("nan")) / 2**20


def fit_slope(points):
    """Least-squares slope of (t, v) points, per second."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (v - mv) for t, v in points) / var if var > 0 else 0.0


def percentiles(xs):
    if not xs:
        return {"n": 0}
    xs = sorted(xs)
    pick = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))]  # noqa: E731
    return {"n": len(xs), "p50": round(pick(0.5), 3), "p90": round(pick(0.9), 3),
            "p99": round(pick(0.99), 3), "max": round(xs[-1], 3),
            "mean": round(statistics.fmean(xs), 3)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2, help="the server's compute threads")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pause-every", type=float, default=120, help="seconds between idle checks")
    ap.add_argument("--warmup-minutes", type=float, default=None,
                    help="memory samples before this are left out of the slopes "
                         "(default: a fifth of the run, at least a minute)")
    ap.add_argument("--max-heap-slope", type=float, default=1.0,
                    help="MB per minute the heap in use may grow between idle pauses, the median "
                         "(1e9 or more: not judged)")
    ap.add_argument("--min-preemptions", type=int, default=1,
                    help="preemptions the run must see (0 where the server is too slow to fill "
                         "its KV cache in the run's minutes, as under AddressSanitizer)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    if args.warmup_minutes is None:  # HTTP threads and malloc arenas come into use first
        args.warmup_minutes = max(1.0, args.minutes / 5)
    srv = ServerProcess("--draft", "ngram", "-k", "auto", "--max-batch", 8, "--ctx", CTX,
                        "--kv-cache-tokens", 384, "--max-queue", 64, "--max-body", MAX_BODY,
                        "-q", threads=args.threads)
    try:
        code = Soak(srv, args).run()
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
    if code != 0:
        print("---- server log ----\n" + srv.log_text()[-4000:])
    sys.exit(code)


if __name__ == "__main__":
    main()
