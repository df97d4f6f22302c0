"""Scale-out behind a real load balancer: three `tandem serve` replicas on the
loopback behind HAProxy (the Debian package), health-checked on /health.

1. The agent workload: 12 sessions that each resend their whole conversation (a
   long system prompt with tool descriptions, then turn after turn), run
   concurrently, once with round-robin balancing and once with session affinity
   on the X-Session-Id header the client sends: a stick table (a session's first
   request placed round-robin, the rest to the same replica), and hashing the
   header (balance hdr, consistent hashing), which keeps sessions as well but
   spreads 12 of them unevenly. Fresh replicas for each run, so all start cold.
   Reported: the prefix-cache hit rate (the replicas' own counters, which must
   equal the responses' usage.prompt_tokens_details.cached_tokens), time to
   first token from turn 2 on, tokens/s. Checked: affinity's TTFT from turn 2 on
   <= 25% of round-robin's, and its hit rate above round-robin's (the ratio is
   reported; see test_affinity for why one run is held to 1.5x).
2. A replica killed (SIGKILL) mid-run: HAProxy's health check takes it out; the
   requests in flight on it fail with a clear error (a stream cut before its
   [DONE], which the client reports), no other request is lost (those sent to it
   after the kill are redispatched), and restarted on its port it is not routed
   to while loading (/health 503 "starting") and rejoins once ready.
3. The inference gateway's model-server metrics (--metrics-compat vllm) under
   load on one replica: names, types, and values against what the test knows
   (requests running and waiting, KV usage = blocks used / blocks, the block size
   and block count, the prefix-cache counters).

Exits 77 (skipped) where haproxy is not installed."""
import concurrent.futures
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import openai

from test_server import (CACHE, MODEL_NAME, ServerProcess, check, failures, parse_metrics,
                         serving)

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
SLOW_MODEL = CACHE / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"

REPLICAS = 3
SESSIONS = 12
TURNS = 4
MAX_TOKENS = 16
# Each replica's KV cache holds four conversations at their longest (~730 tokens,
# 46 blocks, each): its share of the sessions under affinity, while round-robin
# sends every session to every replica, which then evicts one for another.
KV_TOKENS = 3008
# A replica's share of the sessions (4) runs at once, within its KV cache.
MAX_BATCH = 4
PREFILL_CHUNK = 512
# How HAProxy picks a replica.
ROUND_ROBIN = ["balance roundrobin"]
# Session affinity, two ways: hash the header onto a ring of the replicas, or
# remember each session's replica in a stick table (its first request placed
# round-robin, so that sessions spread evenly).
HASH = ["balance hdr(X-Session-Id)", "hash-type consistent"]
STICKY = ["balance roundrobin", "stick-table type string len 64 size 100k expire 30m",
          "stick on req.hdr(X-Session-Id)"]
# HAProxy's health check: every 200 ms, down after 2 failures, up after 2 passes.
CHECK = "inter 200ms fall 2 rise 2"


def replica_args(kv_tokens=None):
    return ["--kv-cache-tokens", kv_tokens or KV_TOKENS, "--max-batch", MAX_BATCH,
            "--prefill-chunk", PREFILL_CHUNK]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replica:
    """One `tandem serve` on a fixed port, restartable on it."""

    def __init__(self, name, *args):
        self.name, self.args, self.port = name, args, free_port()
        self.srv = None

    def start(self, wait=True, model=None):
        kwargs = dict(threads=1, port=self.port)
        if model:
            kwargs["model"] = model
        if wait:
            self.srv = ServerProcess(*self.args, "-q", **kwargs)
        else:
            log = tempfile.NamedTemporaryFile(prefix="tandem-replica-", suffix=".log", delete=False)
            cmd = [os.environ.get("TANDEM_BIN", "build/tandem"), "serve", "-m", str(model),
                   "--model-name", MODEL_NAME, "--port", str(self.port), "-t", "1", "-q",
                   *map(str, self.args)]
            self.srv = None
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
        return self

    def metrics(self):
        return self.srv.metrics()

    def stop(self):
        if self.srv and self.srv.proc.poll() is None:
            self.srv.stop()
        if getattr(self, "proc", None) and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class HAProxy:
    """haproxy -db with a generated config; `state()` reads the stats socket."""

    def __init__(self, replicas, routing):
        self.dir = Path(tempfile.mkdtemp(prefix="tandem-haproxy-"))
        self.port = free_port()
        self.sock = self.dir / "stats.sock"
        servers = "\n".join(f"  server {r.name} 127.0.0.1:{r.port}" for r in replicas)
        routing = "\n  ".join(routing)
        cfg = f"""
global
  stats socket {self.sock} mode 600 level admin
  maxconn 256
defaults
  mode http
  timeout connect 1s
  timeout client 300s
  timeout server 300s
  # A connection refused (a replica just killed, not yet marked down) is retried,
  # the last time on another server.
  retries 3
  option redispatch 1
  # Stream tokens as they come: without it HAProxy corks small writes (MSG_MORE),
  # which holds an SSE stream's events for up to 200 ms.
  option http-no-delay
frontend api
  bind 127.0.0.1:{self.port}
  default_backend replicas
backend replicas
  {routing}
  option httpchk GET /health
  http-check expect status 200
  default-server check {CHECK}
  # On every response, HAProxy's own errors (a 502 when a replica dies) too.
  http-after-response set-header X-Served-By %s
{servers}
"""
        (self.dir / "haproxy.cfg").write_text(cfg)
        self.log = open(self.dir / "haproxy.log", "w")
        self.proc = subprocess.Popen([HAPROXY, "-f", str(self.dir / "haproxy.cfg"), "-db"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"
        self.wait_state(lambda s: all(v == "UP" for v in s.values()), 30)

    def state(self):
        """{server name: 'UP' | 'DOWN' | ...} from `show stat`."""
        deadline = time.time() + 5
        while True:
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(str(self.sock))
                    s.sendall(b"show stat\n")
                    data = b""
                    while chunk := s.recv(65536):
                        data += chunk
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        out = {}
        lines = data.decode().splitlines()
        cols = lines[0].lstrip("# ").split(",")
        for line in lines[1:]:
            row = dict(zip(cols, line.split(",")))
            if row.get("pxname") == "replicas" and row.get("svname") not in ("BACKEND", None):
                out[row["svname"]] = row["status"].split(" ")[0]
        return out

    def wait_state(self, pred, timeout):
        deadline = time.time() + timeout
        while True:
            s = self.state()
            if pred(s) or time.time() > deadline:
                return s
            time.sleep(0.05)

    def client(self):
        return openai.OpenAI(base_url=self.base + "/v1", api_key="unused", max_retries=0,
                             timeout=300)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()


# --- The agent workload -----------------------------------------------------

WORDS = ("alpha bravo cedar delta ember fjord garnet harbor indigo juniper kettle lantern meadow "
         "nickel orchid pepper quartz raven saffron timber umber velvet walnut xenon yarrow zephyr"
         ).split()


def system_prompt(session, run_tag):
    """About 600 tokens, unique to the session from its first token (an
    agent's instructions and tool list), so that sessions share no prefix."""
    rng = random.Random(f"{run_tag}-{session}")
    tools = []
    for i in range(9):
        name = "_".join(rng.sample(WORDS, 2))
        params = ", ".join(f"{rng.choice(WORDS)}: {rng.choice(['string', 'integer', 'boolean'])}"
                           for _ in range(4))
        desc = " ".join(rng.choices(WORDS, k=24))
        tools.append(f"- {name}({params}): {desc}.")
    return (f"Agent {run_tag}-{session}. You are a coding agent working in repository "
            f"{rng.choice(WORDS)}-{rng.randrange(10**6)}. Call the tools below when needed.\n"
            + "\n".join(tools))


USER_TURNS = ["List the files that mention the parser.", "Open the first one and summarise it.",
              "Which function handles errors?", "Write a test for it.", "Run the tests.",
              "Fix the failure.", "Commit the change."]


class Result:
    def __init__(self, session, turn):
        self.session, self.turn = session, turn
        self.server = None  # X-Served-By
        self.t_sent = self.t_first = self.t_done = None
        self.tokens = 0
        self.prompt_tokens = self.cached_tokens = 0  # usage, prompt_tokens_details
        self.arrivals = []  # when each content chunk arrived
        self.error = None


def run_turn(client, session, turn, messages, affinity_header, res):
    headers = {"X-Session-Id": f"session-{session}"} if affinity_header else {}
    res.t_sent = time.time()
    try:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL_NAME, messages=messages, max_tokens=MAX_TOKENS, temperature=0,
            stream=True, stream_options={"include_usage": True}, extra_headers=headers,
            extra_body={"ignore_eos": True})
        res.server = raw.headers.get("x-served-by")
        text, finish = "", None
        for chunk in raw.parse():
            if chunk.choices:
                delta = chunk.choices[0].delta.content or ""
                if delta:
                    res.arrivals.append(time.time())
                if delta and res.t_first is None:
                    res.t_first = time.time()
                text += delta
                finish = chunk.choices[0].finish_reason or finish
            if chunk.usage:
                res.tokens = chunk.usage.completion_tokens
                res.prompt_tokens = chunk.usage.prompt_tokens
                res.cached_tokens = chunk.usage.prompt_tokens_details.cached_tokens
        if finish != "length":
            res.error = f"finish_reason {finish!r}"
        res.t_done = time.time()
        return text
    except Exception as e:  # noqa: BLE001 - every failure is recorded and judged
        res.error = repr(e)
        if isinstance(e, openai.APIStatusError):  # an HTTP error: who answered it
            res.server = e.response.headers.get("x-served-by")
        res.t_done = time.time()
        return None


def run_workload(client, affinity, run_tag, retry=False):
    """Each session a thread resending its conversation turn after turn, with a
    pause between turns (the agent running a tool); the results of all
    requests. With `retry`, a failed turn is sent again once (what an agent
    does when a request fails)."""
    results = []
    lock = threading.Lock()

    def session_loop(s):
        rng = random.Random(f"{run_tag}-{s}-pace")
        time.sleep(rng.uniform(0, 3.0))
        messages = [{"role": "system", "content": system_prompt(s, run_tag)}]
        for t in range(TURNS):
            messages.append({"role": "user", "content": USER_TURNS[(s + t) % len(USER_TURNS)]})
            for attempt in range(2 if retry else 1):
                res = Result(s, t)
                with lock:
                    results.append(res)
                text = run_turn(client, s, t, messages, affinity, res)
                if text is not None:
                    break
            if text is None:
                return  # the conversation cannot go on without this reply
            messages.append({"role": "assistant", "content": text})
            time.sleep(rng.uniform(0, 1.0))

    with concurrent.futures.ThreadPoolExecutor(SESSIONS) as pool:
        list(pool.map(session_loop, range(SESSIONS)))
    return results


def hit_counters(replicas):
    """Summed over the replicas: prompt tokens looked up, found, and preemptions."""
    q = h = p = 0
    for r in replicas:
        m = r.metrics()
        q += m['tandem_prefix_cache_queried_tokens_total{cache="target"}']
        h += m['tandem_prefix_cache_hit_tokens_total{cache="target"}']
        p += m["tandem_preemptions_total"]
    return q, h, p


def spaced_fraction(arrivals):
    """The share of a stream's chunks that came apart from the one before (2 ms or
    more): each token's own decode step, where a balancer that held the events
    back would deliver them in bursts."""
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    return sum(g >= 0.002 for g in gaps) / len(gaps) if gaps else 0.0


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


def workload_run(label, routing, affinity, kv_tokens=KV_TOKENS):
    replicas = [Replica(f"r{i}", *replica_args(kv_tokens)).start() for i in range(REPLICAS)]
    lb = HAProxy(replicas, routing)
    try:
        t0 = time.time()
        results = run_workload(lb.client(), affinity, label)
        wall = time.time() - t0
        q, h, preempted = hit_counters(replicas)
    finally:
        lb.stop()
        for r in replicas:
            r.stop()
    errors = [r.error for r in results if r.error]
    check(not errors and len(results) == SESSIONS * TURNS,
          f"{label}: all {SESSIONS * TURNS} turns completed", errors[:3])
    # Each request's usage.prompt_tokens_details.cached_tokens adds up to the
    # replicas' counters (a preempted request would be looked up again).
    cached = sum(r.cached_tokens for r in results)
    check(preempted > 0 or (cached == h and sum(r.prompt_tokens for r in results) == q),
          f"{label}: the responses' cached_tokens add up to the replicas' prefix-cache counters",
          (cached, h))
    later = [r.t_first - r.t_sent for r in results if r.turn >= 1 and r.t_first]
    by_session = {}
    for r in sorted(results, key=lambda r: r.t_sent):
        by_session.setdefault(r.session, []).append(r)
    # Turns sent to the replica that served the session's previous turn.
    same = sum(a.server == b.server for rs in by_session.values() for a, b in zip(rs, rs[1:]))
    tokens = sum(r.tokens for r in results)
    spread = {}
    for r in results:
        spread.setdefault(r.session, set()).add(r.server)
    shares = sorted(sum(1 for v in spread.values() if name in v) for name in
                    (r.name for r in replicas))
    out = dict(hit_rate=h / q if q else 0.0, ttft_later=median(later), tokens_per_s=tokens / wall,
               wall=wall, servers_per_session=sum(len(v) for v in spread.values()) / len(spread),
               same_replica=same,
               streaming=median([spaced_fraction(r.arrivals) for r in results if r.arrivals]))
    print(f"{label}: prefix-cache hit rate {out['hit_rate']:.3f} ({h:.0f}/{q:.0f} prompt tokens), "
          f"median TTFT from turn 2 on {out['ttft_later'] * 1000:.0f} ms, "
          f"{out['tokens_per_s']:.1f} generated tokens/s, {wall:.1f} s, "
          f"{out['servers_per_session']:.2f} replicas per session, sessions per replica {shares}, "
          f"{same}/{SESSIONS * (TURNS - 1)} later turns on the previous turn's replica")
    return out


def test_affinity():
    rr = workload_run("round-robin", ROUND_ROBIN, affinity=False)
    aff = workload_run("affinity (stick table)", STICKY, affinity=True)
    hashed = workload_run("affinity (hash)", HASH, affinity=True)
    check(hashed["servers_per_session"] == 1.0, "hashing the header: each session on one replica",
          hashed["servers_per_session"])
    check(aff["servers_per_session"] == 1.0, "affinity: each session stays on one replica",
          aff["servers_per_session"])
    # Round-robin hits the prefix cache on the turns that land, by chance, on the
    # replica of the session's previous turn: a third of them on average, so its
    # hit rate is about a third of affinity's, and one run scatters around that
    # (docs/deploy.md gives the runs). The 3x holds over runs, not in
    # every one: a single run is held to 1.5x, which round-robin would reach only
    # by sending two thirds of the later turns (24 of 36, against 12 expected,
    # 4 standard deviations) to the previous turn's replica.
    check(aff["streaming"] >= 0.5, "the streams pass HAProxy token by token (median share of "
          f"chunks arriving apart: {aff['streaming']:.2f})")
    ratio = aff["hit_rate"] / max(rr["hit_rate"], 1e-9)
    print(f"hit-rate ratio affinity / round-robin: {ratio:.2f}")
    check(ratio >= 1.5, f"affinity hit rate {aff['hit_rate']:.3f} >= 1.5x round-robin's "
          f"{rr['hit_rate']:.3f}")
    check(aff["ttft_later"] <= 0.25 * rr["ttft_later"],
          f"affinity TTFT from turn 2 on {aff['ttft_later'] * 1000:.0f} ms <= 25% of "
          f"round-robin's {rr['ttft_later'] * 1000:.0f} ms")


# --- A replica killed mid-run -----------------------------------------------


def test_kill_and_rejoin():
    replicas = [Replica(f"r{i}", *replica_args()).start() for i in range(REPLICAS)]
    lb = HAProxy(replicas, STICKY)
    victim = replicas[1]
    killed_at = []
    done = threading.Event()

    def killer():
        # A second into the run, once r1 is serving a request, SIGKILL it.
        time.sleep(1.0)
        while not done.is_set():
            try:
                if victim.metrics()["tandem_requests_running"] >= 1:
                    t_signal = time.time()
                    victim.srv.proc.send_signal(signal.SIGKILL)
                    victim.srv.proc.wait()
                    killed_at.append((t_signal, time.time()))
                    return
            except OSError:
                pass
            time.sleep(0.02)

    try:
        kill_thread = threading.Thread(target=killer)
        kill_thread.start()
        results = run_workload(lb.client(), True, "kill", retry=True)
        done.set()
        kill_thread.join()
        check(bool(killed_at), "r1 was killed while serving")
        if not killed_at:
            return
        state = lb.wait_state(lambda s: s.get("r1") == "DOWN", 10)
        check(state.get("r1") == "DOWN", "the health check took the killed replica out", state)
        check(all(state.get(r.name) == "UP" for r in replicas if r is not victim),
              "the other replicas stay up", state)
        t_signal, t_exit = killed_at[0]
        # In flight on r1 at the kill: sent before it exited, not done before the
        # signal, and answered by r1 or cut before any reply named a replica (a
        # request r1 held in its queue or prefill had no response headers yet; the
        # other replicas stay up, and what they served is checked below).
        in_flight = [r for r in results if r.server in ("r1", None) and r.t_sent < t_exit
                     and r.t_done >= t_signal]
        failed = [r for r in results if r.error]
        lost = [r for r in failed if r not in in_flight]
        print(f"kill: {len(results)} requests, {len(in_flight)} in flight on r1 at the kill, "
              f"{len(failed)} failed")
        check(not lost, "no request lost beyond those in flight on the killed replica",
              [(r.session, r.turn, r.server, r.error) for r in lost])
        check(all(r.error for r in in_flight),
              "the requests in flight on the killed replica got an error, not a truncated reply",
              [(r.session, r.turn, r.error) for r in in_flight if not r.error])
        after = [r for r in results if r.t_sent > t_exit]
        check(after and all(r.server != "r1" and not r.error for r in after),
              f"all {len(after)} requests sent after the kill served by the others",
              [(r.session, r.turn, r.server, r.error) for r in after
               if r.server == "r1" or r.error])

        # Restart r1 on its port. SmolLM2 loads in a blink; a bigger model under the
        # same API name loads long enough to watch: /health says 503 "starting"
        # meanwhile and HAProxy keeps r1 out.
        victim.start(wait=False, model=SLOW_MODEL)
        line = victim.proc.stdout.readline()
        check("starting on" in line, "the restarted replica listens while loading", line)
        status, body = http_get(victim.port, "/health")
        check(status == 503 and '"starting"' in body, "/health while loading: 503 starting",
              (status, body))
        time.sleep(0.6)  # three health checks
        loading = http_get(victim.port, "/health")[0] == 503
        state = lb.state()
        check(loading and state.get("r1") == "DOWN", "a loading replica is not routed to",
              (loading, state))
        ready = victim.proc.stdout.readline()
        check("listening on" in ready, "the restarted replica finished loading", ready)
        state = lb.wait_state(lambda s: s.get("r1") == "UP", 10)
        check(state.get("r1") == "UP", "the restarted replica rejoined", state)
        # New sessions reach it again (placed round-robin); their requests succeed.
        new = []
        for i in range(REPLICAS):
            res = Result(100 + i, 0)
            run_turn(lb.client(), 100 + i, 0, [{"role": "user", "content": "Hello"}], True, res)
            new.append(res)
        check(any(r.server == "r1" for r in new) and not any(r.error for r in new),
              "new sessions are served by the rejoined replica too",
              [(r.server, r.error) for r in new])
    finally:
        lb.stop()
        for r in replicas:
            r.stop()


def http_get(port, path):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return r.status, body


# --- The inference gateway's metrics under load ------------------------------


def metric_types(text):
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


def test_gateway_metrics():
    max_batch, n = 2, 6
    kv_tokens = 1024
    with serving(ServerProcess("--metrics-compat", "vllm", "--max-batch", max_batch,
                               "--kv-cache-tokens", kv_tokens, "-q", threads=1),
                 "gateway metrics") as srv:
        status, text, _ = srv.request("GET", "/metrics")
        types = metric_types(text)
        for name in ("vllm:num_requests_waiting", "vllm:num_requests_running",
                     "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
                     "vllm:cache_config_info"):
            check(types.get(name) == "gauge", f"{name} is a gauge", types.get(name))
        for name in ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"):
            check(types.get(name) == "counter", f"{name} is a counter", types.get(name))
        m = parse_metrics(text)
        info = [k for k in m if k.startswith("vllm:cache_config_info{")]
        blocks = kv_tokens // 16
        check(info == [f'vllm:cache_config_info{{block_size="16",num_gpu_blocks="{blocks}"}}'],
              f"vllm:cache_config_info: block_size 16, num_gpu_blocks {blocks}", info)
        check(m["vllm:kv_cache_usage_perc"] == 0 and m["vllm:num_requests_running"] == 0,
              "idle: no usage, nothing running")

        # n long requests at once on a batch of 2: 2 running, n-2 waiting. They
        # share a prompt prefix of a few blocks, which the later ones find cached.
        # Each is sent once the server holds the one before, and the first two run
        # for 320 steps: on a busy host, threads sent all at once could arrive after
        # the first ones finished, and the server never held all six.
        shared = "You are a patient counting assistant who never skips a number. " * 6
        def one(i):
            return srv.client.completions.create(
                model=MODEL_NAME, prompt=shared + f"Request {i}: count to a hundred.",
                max_tokens=320,
                temperature=0, extra_body={"ignore_eos": True})

        def held(m):
            return m["vllm:num_requests_running"] + m["vllm:num_requests_waiting"]

        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            futures = []
            for i in range(n):
                futures.append(pool.submit(one, i))
                srv.wait_metric(lambda m: held(m) >= i + 1, 30)
            m = srv.wait_metric(lambda m: m["vllm:num_requests_running"] == max_batch
                                and m["vllm:num_requests_waiting"] == n - max_batch, 30)
            check(m["vllm:num_requests_running"] == max_batch
                  and m["vllm:num_requests_waiting"] == n - max_batch,
                  f"under load: {max_batch} running, {n - max_batch} waiting",
                  (m["vllm:num_requests_running"], m["vllm:num_requests_waiting"]))
            check(m["vllm:num_requests_running"] == m["tandem_requests_running"]
                  and m["vllm:num_requests_waiting"] == m["tandem_requests_queued"],
                  "the vllm: names carry tandem's own figures")
            used = m['tandem_kv_blocks_used{cache="target"}']
            expect = used / blocks
            check(used > 0 and abs(m["vllm:kv_cache_usage_perc"] - expect) < 1e-9
                  and m["vllm:gpu_cache_usage_perc"] == m["vllm:kv_cache_usage_perc"]
                  and m["tandem_kv_cache_usage_ratio"] == m["vllm:kv_cache_usage_perc"],
                  f"KV usage = blocks used / blocks ({used:.0f}/{blocks} = {expect:.4f})",
                  m["vllm:kv_cache_usage_perc"])
            done = [f.result(timeout=300) for f in futures]
        m = srv.wait_metric(lambda m: m["vllm:num_requests_running"] == 0)
        prompt = sum(r.usage.prompt_tokens for r in done)
        cached = sum(r.usage.prompt_tokens_details.cached_tokens for r in done)
        check(cached > 0 and m["vllm:prefix_cache_queries_total"] == prompt
              and m["vllm:prefix_cache_hits_total"] == cached
              and m['tandem_prefix_cache_hit_tokens_total{cache="target"}'] == cached,
              f"prefix-cache counters: {prompt} prompt tokens looked up, {cached} found "
              "(the responses' usage)",
              (m["vllm:prefix_cache_queries_total"], m["vllm:prefix_cache_hits_total"]))
        check(m["vllm:num_requests_running"] == 0 and m["vllm:num_requests_waiting"] == 0
              and m["vllm:kv_cache_usage_perc"] == 0, "after the load: back to zero")
    # Without the flag, only tandem's names.
    with serving(ServerProcess("-q", threads=1), "no compat") as srv:
        _, text, _ = srv.request("GET", "/metrics")
        check("vllm:" not in text and "tandem_kv_cache_usage_ratio" in text,
              "without --metrics-compat: tandem's names only")


def repeat_affinity(n):
    """`--repeat N`: the round-robin and stick-table runs N times, for the spread
    of the hit-rate ratio (docs/deploy.md)."""
    rr, aff = [], []
    for i in range(n):
        rr.append(workload_run(f"round-robin #{i + 1}", ROUND_ROBIN, affinity=False))
        aff.append(workload_run(f"affinity (stick table) #{i + 1}", STICKY, affinity=True))
        print(f"run {i + 1}: ratio {aff[-1]['hit_rate'] / max(rr[-1]['hit_rate'], 1e-9):.2f}, "
              f"TTFT {aff[-1]['ttft_later'] / rr[-1]['ttft_later'] * 100:.0f}% of round-robin's")

    def mean(runs, key):
        return sum(r[key] for r in runs) / len(runs)

    print(f"{n} runs: hit rate {mean(aff, 'hit_rate'):.3f} vs {mean(rr, 'hit_rate'):.3f} "
          f"(ratio of the means {mean(aff, 'hit_rate') / mean(rr, 'hit_rate'):.2f}); "
          f"{sum(a['hit_rate'] >= 3 * r['hit_rate'] for a, r in zip(aff, rr))}/{n} runs >= 3x; "
          f"later turns on the previous turn's replica under round-robin: "
          f"{sum(r['same_replica'] for r in rr)}/{n * SESSIONS * (TURNS - 1)}")


def main():
    if not Path(HAPROXY).exists():
        print("haproxy is not installed (scripts/setup.sh installs it): skipped")
        sys.exit(77)
    t0 = time.time()
    if len(sys.argv) == 3 and sys.argv[1] == "--repeat":
        repeat_affinity(int(sys.argv[2]))
        sys.exit(1 if failures else 0)
    test_gateway_metrics()
    test_affinity()
    test_kill_and_rejoin()
    print(f"{time.time() - t0:.0f} s")
    if failures:
        print(f"{len(failures)} failed: {failures}")
        sys.exit(1)


if __name__ == "__main__":
    main()
