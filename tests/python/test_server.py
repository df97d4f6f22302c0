"""tandem serve against a real OpenAI client (the `openai` package) on
127.0.0.1 with SmolLM2-135M: completions, chat, streaming, the "tandem"
extension, speculative decoding (--draft ngram) giving the same greedy text as
plain decoding, every error case with its status and OpenAI error object, a full
queue answered at once with 429, clients that disconnect (streaming, queued,
non-streaming) having their requests cancelled and KV blocks freed, and
SIGTERM/SIGINT draining in-flight requests and exiting 0.

The helpers (ServerProcess, metrics parsing) are imported by test_server_load.py."""
import contextlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import openai

TANDEM = os.environ.get("TANDEM_BIN", "build/tandem")
CACHE = Path(os.environ.get("TANDEM_CACHE", Path.home() / ".cache" / "tandem"))
MODEL = CACHE / "models" / "smollm2-135m-instruct-q4_1.gguf"
MODEL_NAME = "smollm2-135m-instruct-q4_1"

failures = []


def check(cond, label, detail=""):
    shown = f": {detail}" if detail and not cond else ""
    print(f"{'ok  ' if cond else 'FAIL'} {label}{shown}")
    if not cond:
        failures.append(label)
    return cond


class ServerProcess:
    """`tandem serve --port 0 ...`: waits for the "listening on" line, gives an
    OpenAI client, raw HTTP access and /metrics, and stops it with a signal."""

    def __init__(self, *args, startup_timeout=60, threads=2, model=MODEL, port=0):
        if not Path(model).exists():
            sys.exit(f"{model} is missing: run `make models`")
        self.log = tempfile.NamedTemporaryFile(prefix="tandem-serve-", suffix=".log", delete=False)
        cmd = [TANDEM, "serve", "-m", str(model), "--port", str(port), "-t", str(threads),
               *map(str, args)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True)
        # "starting on http://..." as soon as it listens (the model still loading),
        # then "listening on http://..." once it serves.
        lines = []

        def read_until_ready():
            for out in self.proc.stdout:
                lines.append(out)
                if "listening on" in out:
                    return

        reader = threading.Thread(target=read_until_ready, daemon=True)
        reader.start()
        reader.join(startup_timeout)
        self.startup_lines = list(lines)
        m = re.search(r"listening on http://([\d.]+):(\d+)", lines[-1] if lines else "")
        if not m:
            self.proc.kill()
            sys.exit(f"server did not start: {' '.join(cmd)}\n{self.log_text()}")
        self.host, self.port = m.group(1), int(m.group(2))
        self.base = f"http://{self.host}:{self.port}"
        self.client = openai.OpenAI(base_url=self.base + "/v1", api_key="unused", max_retries=0,
                                    timeout=120)

    def log_text(self):
        return Path(self.log.name).read_text(errors="replace")

    def request(self, method, path, body=None, headers=None, timeout=60):
        """Raw HTTP: (status, parsed JSON or text, headers)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        conn.request(method, path, body=body,
                     headers={"Content-Type": "application/json", **(headers or {})})
        r = conn.getresponse()
        data = r.read().decode("utf-8", "replace")
        conn.close()
        try:
            data = json.loads(data)
        except ValueError:
            pass
        return r.status, data, dict(r.getheaders())

    def metrics(self):
        status, text, _ = self.request("GET", "/metrics")
        assert status == 200, status
        return parse_metrics(text)

    def wait_metric(self, pred, timeout=10):
        deadline = time.time() + timeout
        while True:
            m = self.metrics()
            if pred(m) or time.time() > deadline:
                return m
            time.sleep(0.05)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Send `sig`; the exit code (None if it did not exit in time, then killed)."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def parse_metrics(text):
    """Prometheus text to {'name{labels}': value}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def blocks_used(m):
    return m['tandem_kv_blocks_used{cache="target"}']


def stream_text(stream, chat):
    """Concatenated text, the chunks, and the last chunk with a finish_reason."""
    text, chunks, final = "", [], None
    for c in stream:
        chunks.append(c)
        if not c.choices:
            continue
        ch = c.choices[0]
        piece = ch.delta.content if chat else ch.text
        text += piece or ""
        if ch.finish_reason:
            final = c
    return text, chunks, final


def expect_error(srv, label, path, body, status, param=None, code=None, raw=False):
    """A bad request must get `status` and a well-formed OpenAI error object."""
    s, data, _ = srv.request("POST", path, body if raw else json.dumps(body))
    err = data.get("error") if isinstance(data, dict) else None
    ok = (s == status and isinstance(err, dict)
          and set(err) == {"message", "type", "param", "code"} and err["message"]
          and (param is None or err["param"] == param) and (code is None or err["code"] == code))
    check(ok, f"error: {label} -> {status}", f"got {s} {data}")


COMPLETION = "/v1/completions"
CHAT = "/v1/chat/completions"


def test_basics(srv):
    c = srv.client
    models = c.models.list()
    check([m.id for m in models.data] == [MODEL_NAME], "/v1/models lists the model", models)
    check(c.models.retrieve(MODEL_NAME).id == MODEL_NAME, "/v1/models/{id}")
    s, data, _ = srv.request("GET", "/health")
    check(s == 200 and data == {"status": "ready"}, "/health", (s, data))
    s, data, _ = srv.request("GET", "/live")
    check(s == 200 and data == {"status": "ready"}, "/live", (s, data))

    r = c.completions.create(model=MODEL_NAME, prompt="The capital of France is", max_tokens=12,
                             temperature=0)
    ch = r.choices[0]
    check(r.object == "text_completion" and r.id.startswith("cmpl-"), "completion object", r)
    check(ch.finish_reason == "length" and len(ch.text) > 0, "completion text, finish length", ch)
    check(r.usage.completion_tokens == 12 and r.usage.prompt_tokens > 0
          and r.usage.total_tokens == r.usage.prompt_tokens + 12, "completion usage", r.usage)
    t = r.model_extra.get("tandem")
    check(isinstance(t, dict) and t["drafted"] == 0 and t["tokens_per_round"] == 1.0
          and {"acceptance_rate", "accepted", "tokens_per_round"} <= set(t),
          "tandem stats without a drafter", t)
    # The same greedy request again gives the same text.
    r2 = c.completions.create(model=MODEL_NAME, prompt="The capital of France is", max_tokens=12,
                              temperature=0)
    check(r2.choices[0].text == ch.text, "greedy completion is repeatable")
    # Stop strings: the text ends before the stop string, finish_reason "stop".
    words = ch.text.split()
    if len(words) >= 2:
        stop = words[1]
        rs = c.completions.create(model=MODEL_NAME, prompt="The capital of France is",
                                  max_tokens=12, temperature=0, stop=[stop, "zzzz"])
        check(rs.choices[0].finish_reason == "stop" and stop not in rs.choices[0].text
              and ch.text.startswith(rs.choices[0].text), "stop string",
              (stop, rs.choices[0].text))
    # Prompt as token ids.
    ri = c.completions.create(model=MODEL_NAME, prompt=[504, 3575, 282], max_tokens=4,
                              temperature=0)
    check(ri.usage.prompt_tokens == 3 and ri.usage.completion_tokens == 4, "token-id prompt",
          ri.usage)
    # Seeded sampling is reproducible; the model field may be omitted (raw request).
    a = c.completions.create(model=MODEL_NAME, prompt="Once upon a time", max_tokens=16,
                             temperature=0.9, top_p=0.95, seed=7,
                             extra_body={"top_k": 40, "min_p": 0.02, "repetition_penalty": 1.1})
    s, b, _ = srv.request("POST", COMPLETION, {
        "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0.9, "top_p": 0.95,
        "seed": 7, "top_k": 40, "min_p": 0.02, "repetition_penalty": 1.1})
    check(s == 200 and b["choices"][0]["text"] == a.choices[0].text,
          "seeded sampling reproducible", (a.choices[0].text, b))

    chat = c.chat.completions.create(
        model=MODEL_NAME, max_tokens=24, temperature=0,
        messages=[{"role": "system", "content": "You are terse."},
                  {"role": "user", "content": "Name a primary colour."}])
    m = chat.choices[0]
    check(chat.object == "chat.completion" and m.message.role == "assistant"
          and len(m.message.content) > 0 and m.finish_reason in ("stop", "length"),
          "chat completion", chat)
    # The prompt is the ChatML rendering: more tokens than the two messages' words.
    check(chat.usage.prompt_tokens > 10, "chat prompt rendered with the template", chat.usage)
    # Content parts and the "developer" role are accepted.
    chat2 = c.chat.completions.create(
        model=MODEL_NAME, max_tokens=24, temperature=0,
        messages=[{"role": "developer", "content": "You are terse."},
                  {"role": "user", "content": [{"type": "text", "text": "Name a primary "},
                                               {"type": "text", "text": "colour."}]}])
    check(chat2.choices[0].message.content == m.message.content,
          "content parts and developer role render like plain messages")
    return ch.text, m.message.content


def test_streaming(srv, greedy_completion, greedy_chat):
    c = srv.client
    st = c.completions.create(model=MODEL_NAME, prompt="The capital of France is", max_tokens=12,
                              temperature=0, stream=True, stream_options={"include_usage": True})
    text, chunks, final = stream_text(st, chat=False)
    check(text == greedy_completion, "streamed completion equals the non-streamed one",
          (text, greedy_completion))
    check(len(chunks) >= 4, "completion streamed in several chunks", len(chunks))
    check(final is not None and final.choices[0].finish_reason == "length",
          "stream ends with finish_reason")
    check(final is not None and "tandem" in final.model_extra, "final chunk carries tandem stats")
    last = chunks[-1]
    check(not last.choices and last.usage is not None and last.usage.completion_tokens == 12,
          "include_usage: last chunk has usage and no choices", last)
    check(all(ch.usage is None for ch in chunks[:-1]), "earlier chunks have usage null")

    st = c.chat.completions.create(
        model=MODEL_NAME, max_tokens=24, temperature=0, stream=True,
        messages=[{"role": "system", "content": "You are terse."},
                  {"role": "user", "content": "Name a primary colour."}])
    text, chunks, final = stream_text(st, chat=True)
    check(chunks[0].choices[0].delta.role == "assistant", "chat stream opens with the role")
    check(text == greedy_chat, "streamed chat equals the non-streamed one", (text, greedy_chat))
    check(all(ch.object == "chat.completion.chunk" for ch in chunks), "chat chunk objects")

    # The wire format: data: lines, [DONE] at the end.
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=60)
    conn.request("POST", COMPLETION, json.dumps({"prompt": "Hello", "max_tokens": 3,
                                                 "temperature": 0, "stream": True}),
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    raw = r.read().decode()
    conn.close()
    events = [e for e in raw.split("\n\n") if e]
    check(r.getheader("Content-Type", "").startswith("text/event-stream"), "SSE content type")
    check(all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]",
          "SSE framing ends with data: [DONE]", raw[-200:])


def test_errors(srv):
    long_prompt = "word " * 400  # beyond --ctx 256
    expect_error(srv, "invalid JSON", COMPLETION, '{"prompt": "x", ', 400, code="invalid_json",
                 raw=True)
    expect_error(srv, "body not an object", COMPLETION, [1, 2], 400)
    expect_error(srv, "prompt wrong type", COMPLETION, {"prompt": 12}, 400, param="prompt")
    expect_error(srv, "max_tokens wrong type", COMPLETION, {"prompt": "x", "max_tokens": "ten"},
                 400, param="max_tokens")
    expect_error(srv, "temperature wrong type", COMPLETION, {"prompt": "x", "temperature": "hot"},
                 400, param="temperature")
    expect_error(srv, "stream wrong type", COMPLETION, {"prompt": "x", "stream": "yes"}, 400,
                 param="stream")
    expect_error(srv, "stop wrong type", COMPLETION, {"prompt": "x", "stop": [1]}, 400,
                 param="stop")
    expect_error(srv, "messages wrong type", CHAT, {"messages": "hi"}, 400, param="messages")
    expect_error(srv, "message content wrong type", CHAT,
                 {"messages": [{"role": "user", "content": 5}]}, 400, param="messages")
    expect_error(srv, "unknown role", CHAT, {"messages": [{"role": "wizard", "content": "x"}]},
                 400, param="messages")
    expect_error(srv, "missing prompt", COMPLETION, {"max_tokens": 3}, 400, param="prompt")
    expect_error(srv, "empty prompt", COMPLETION, {"prompt": ""}, 400, param="prompt")
    expect_error(srv, "empty token-id prompt", COMPLETION, {"prompt": []}, 400, param="prompt")
    expect_error(srv, "token id outside the vocabulary", COMPLETION, {"prompt": [1, 10 ** 7]}, 400,
                 param="prompt")
    expect_error(srv, "empty messages", CHAT, {"messages": []}, 400, param="messages")
    expect_error(srv, "unknown model", COMPLETION, {"model": "gpt-9", "prompt": "x"}, 404,
                 param="model", code="model_not_found")
    expect_error(srv, "prompt + max_tokens beyond the context", COMPLETION,
                 {"prompt": "Hello", "max_tokens": 300}, 400, param="max_tokens",
                 code="context_length_exceeded")
    expect_error(srv, "prompt beyond the context", COMPLETION, {"prompt": long_prompt}, 400,
                 param="prompt", code="context_length_exceeded")
    expect_error(srv, "chat beyond the context", CHAT,
                 {"messages": [{"role": "user", "content": long_prompt}]}, 400,
                 code="context_length_exceeded")
    expect_error(srv, "negative temperature", COMPLETION, {"prompt": "x", "temperature": -0.5},
                 400, param="temperature")
    expect_error(srv, "top_p out of range", COMPLETION, {"prompt": "x", "top_p": 1.5}, 400,
                 param="top_p")
    expect_error(srv, "max_tokens 0", COMPLETION, {"prompt": "x", "max_tokens": 0}, 400,
                 param="max_tokens")
    expect_error(srv, "n > 1", COMPLETION, {"prompt": "x", "n": 2}, 400, param="n",
                 code="unsupported_value")
    expect_error(srv, "n > 1 (chat)", CHAT, {"messages": [{"role": "user", "content": "x"}],
                                             "n": 3}, 400, param="n")
    expect_error(srv, "logprobs above 5", COMPLETION, {"prompt": "x", "logprobs": 6}, 400,
                 param="logprobs")
    expect_error(srv, "echo", COMPLETION, {"prompt": "x", "echo": True}, 400, param="echo")
    expect_error(srv, "presence_penalty", COMPLETION, {"prompt": "x", "presence_penalty": 0.5},
                 400, param="presence_penalty")
    expect_error(srv, "tools", CHAT, {"messages": [{"role": "user", "content": "x"}],
                                      "tools": [{"type": "function"}]}, 400, param="tools")
    expect_error(srv, "batch of prompts", COMPLETION, {"prompt": ["a", "b"]}, 400,
                 param="prompt")
    expect_error(srv, "stream_options without stream", COMPLETION,
                 {"prompt": "x", "stream_options": {"include_usage": True}}, 400,
                 param="stream_options")
    expect_error(srv, "image content part", CHAT, {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x"}}]}]}, 400, param="messages")
    expect_error(srv, "oversized body", COMPLETION, {"prompt": "a" * 300_000}, 413,
                 code="request_too_large")
    s, data, _ = srv.request("GET", "/no/such/path")
    check(s == 404 and "error" in data, "unknown path -> 404 error object", (s, data))
    s, data, h = srv.request("GET", COMPLETION)
    check(s == 405 and "error" in data, "GET on a POST endpoint -> 405", (s, data))

    # The same through the OpenAI client: the right exception classes.
    c = srv.client
    for label, exc, kwargs in [
            ("client: negative temperature", openai.BadRequestError,
             dict(prompt="x", temperature=-1)),
            ("client: n=2", openai.BadRequestError, dict(prompt="x", n=2)),
            ("client: context", openai.BadRequestError, dict(prompt="x", max_tokens=10_000)),
            ("client: oversized", openai.APIStatusError, dict(prompt="b" * 300_000)),
    ]:
        try:
            c.completions.create(model=MODEL_NAME, **kwargs)
            check(False, label, "no error raised")
        except exc as e:
            check(e.status_code in (400, 413) and isinstance(e.body, dict)
                  and e.body.get("message"), label, e)
    try:
        c.completions.create(model="gpt-9", prompt="x")
        check(False, "client: unknown model", "no error raised")
    except openai.NotFoundError as e:
        check(e.status_code == 404, "client: unknown model -> NotFoundError")
    s, data, _ = srv.request("GET", "/health")
    check(s == 200, "server healthy after the bad requests")
    m = srv.metrics()
    check(m['tandem_requests_rejected_total{reason="invalid"}'] >= 25
          and m['tandem_requests_rejected_total{reason="too_large"}'] >= 1
          and m['tandem_requests_rejected_total{reason="model_not_found"}'] >= 1,
          "rejections counted in /metrics")


def open_stream(srv, max_tokens=200):
    """A streaming request that cannot finish soon (ignore_eos), opened."""
    return srv.client.completions.create(
        model=MODEL_NAME, prompt="Count with me: one, two, three,", max_tokens=max_tokens,
        temperature=0, stream=True, extra_body={"ignore_eos": True})


def test_queue_full_and_disconnects(srv, max_batch, max_queue):
    before = srv.metrics()
    # Fill the batch and the queue with streams that take long, then one more.
    # (A request counts as queued until the engine admits it, so the batch is
    # filled one by one.)
    streams = []
    for i in range(max_batch):
        streams.append(open_stream(srv))
        srv.wait_metric(lambda m: m["tandem_requests_running"] == i + 1)
    for i in range(max_queue):
        streams.append(open_stream(srv))
        srv.wait_metric(lambda m: m["tandem_requests_queued"] == i + 1)
    m = srv.wait_metric(lambda m: m["tandem_requests_running"] == max_batch
                        and m["tandem_requests_queued"] == max_queue)
    check(m["tandem_requests_running"] == max_batch and m["tandem_requests_queued"] == max_queue,
          "batch and queue full", (m["tandem_requests_running"], m["tandem_requests_queued"]))
    t0 = time.time()
    s, data, headers = srv.request("POST", COMPLETION, {"prompt": "x", "max_tokens": 2})
    check(s == 429 and data["error"]["code"] == "queue_full" and time.time() - t0 < 2,
          "full queue -> 429 at once", (s, data, time.time() - t0))
    try:
        srv.client.completions.create(model=MODEL_NAME, prompt="x", max_tokens=2)
        check(False, "client: full queue raises RateLimitError")
    except openai.RateLimitError:
        check(True, "client: full queue raises RateLimitError")
    check(blocks_used(m) > 0, "running requests hold KV blocks", blocks_used(m))

    # Read a little from the running streams, then hang up on all (running and queued).
    first = next(iter(streams[0]))
    check(first.choices[0].text != "", "stream delivers text before the disconnect")
    for st in streams:
        st.close()
    m = srv.wait_metric(lambda m: blocks_used(m) == 0 and m["tandem_requests_running"] == 0
                        and m["tandem_requests_queued"] == 0)
    check(blocks_used(m) == 0 and m["tandem_requests_running"] == 0
          and m["tandem_requests_queued"] == 0,
          "disconnected streams cancelled, KV blocks freed", (blocks_used(m),
                                                              m["tandem_requests_running"]))
    n = max_batch + max_queue
    cancelled = (m['tandem_requests_finished_total{finish_reason="cancelled"}']
                 - before['tandem_requests_finished_total{finish_reason="cancelled"}'])
    check(cancelled == n, "every disconnected request finished as cancelled", cancelled)
    check(m["tandem_client_disconnects_total"] - before["tandem_client_disconnects_total"] == n,
          "disconnects counted")
    check(m['tandem_requests_rejected_total{reason="queue_full"}'] >= 2, "queue_full counted")

    # A non-streaming request whose client goes away is cancelled too.
    sock = socket.create_connection((srv.host, srv.port))
    body = json.dumps({"prompt": "Count with me: one, two,", "max_tokens": 200,
                       "ignore_eos": True, "temperature": 0})
    sock.sendall((f"POST {COMPLETION} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
    srv.wait_metric(lambda m: blocks_used(m) > 0)
    sock.close()
    m2 = srv.wait_metric(lambda m: blocks_used(m) == 0 and m["tandem_requests_running"] == 0)
    check(blocks_used(m2) == 0 and m2['tandem_requests_finished_total{finish_reason="cancelled"}']
          == m['tandem_requests_finished_total{finish_reason="cancelled"}'] + 1,
          "non-streaming client disconnect cancels the request and frees its blocks")


def test_metrics_format(srv):
    s, text, headers = srv.request("GET", "/metrics")
    check(s == 200 and headers.get("Content-Type", "").startswith("text/plain"), "/metrics served")
    m = parse_metrics(text)
    for name in ["tandem_prompt_tokens_total", "tandem_generation_tokens_total",
                 "tandem_spec_drafted_tokens_total", "tandem_spec_accepted_tokens_total",
                 "tandem_spec_acceptance_rate", "tandem_preemptions_total",
                 "tandem_requests_queued", "tandem_requests_running",
                 'tandem_kv_blocks_free{cache="target"}', 'tandem_kv_blocks_used{cache="draft"}',
                 'tandem_prefix_cache_hit_rate{cache="target"}',
                 'tandem_time_to_first_token_seconds_bucket{le="+Inf"}',
                 "tandem_inter_token_latency_seconds_count", "tandem_tokens_per_round_sum"]:
        check(name in m, f"metric {name}")
    check(m["tandem_generation_tokens_total"] > 0 and m["tandem_prompt_tokens_total"] > 0,
          "token counters advanced")
    check(m['tandem_kv_blocks_free{cache="target"}'] + m['tandem_kv_blocks_used{cache="target"}']
          == m['tandem_kv_blocks_total{cache="target"}'], "free + used = total blocks")
    # Histogram buckets are cumulative and end at the count.
    buckets = [(k, v) for k, v in m.items()
               if k.startswith("tandem_time_to_first_token_seconds_bucket")]
    values = [v for _, v in buckets]
    check(values == sorted(values)
          and values[-1] == m["tandem_time_to_first_token_seconds_count"] > 0,
          "TTFT histogram cumulative", buckets)
    check(m['tandem_prefix_cache_hit_tokens_total{cache="target"}'] > 0,
          "repeated prompts hit the prefix cache")
    # The same prompt twice: the second's usage counts its cached prompt tokens
    # (whole blocks of 16; never the block holding the last prompt token).
    prompt = "A long and winding prompt about caches, blocks and prefixes. " * 8
    usage = [srv.client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=1,
                                           temperature=0).usage for _ in range(2)]
    n = usage[1].prompt_tokens
    check(usage[1].prompt_tokens_details.cached_tokens == (n - 1) // 16 * 16
          and usage[0].prompt_tokens_details.cached_tokens < usage[1].prompt_tokens_details.cached_tokens,
          "usage.prompt_tokens_details.cached_tokens: the second of two equal prompts is cached",
          (usage[0].prompt_tokens_details, usage[1].prompt_tokens_details, n))


def test_graceful_stop(srv, sig):
    """A signal while a stream is in flight: the stream completes, new requests
    get 503, the process exits 0."""
    st = srv.client.completions.create(model=MODEL_NAME, prompt="Count with me: one, two,",
                                       max_tokens=120, temperature=0, stream=True,
                                       extra_body={"ignore_eos": True})
    it = iter(st)
    first = next(it)
    result = {}

    def stopper():
        result["code"] = srv.stop(sig)

    t = threading.Thread(target=stopper)
    t.start()
    time.sleep(0.3)
    try:
        s, data, _ = srv.request("POST", COMPLETION, {"prompt": "x", "max_tokens": 2}, timeout=10)
        refused = s == 503
    except OSError:
        refused = True  # the listener may already be closed
    check(refused, f"{sig.name}: new requests refused while draining")
    try:
        s, data, _ = srv.request("GET", "/health", timeout=10)
        draining = s == 503 and data == {"status": "draining"}
    except OSError:
        draining = True  # the listener may already be closed
    check(draining, f"{sig.name}: /health says draining (503)")
    text, chunks, final = stream_text(it, chat=False)
    check(final is not None and final.choices[0].finish_reason == "length"
          and final.model_extra["tandem"] is not None,
          f"{sig.name}: in-flight stream finished", final)
    t.join(90)
    check(result.get("code") == 0, f"{sig.name}: server exits 0", result.get("code"))


def test_speculative(srv, plain_outputs):
    """--draft ngram: greedy output identical to plain decoding; drafting happens;
    the per-request opt-out turns it off."""
    c = srv.client
    prompt = ("Repeat the list exactly: apple, banana, cherry, apple, banana, cherry, apple, "
              "banana, cherry, apple, banana,")
    for p, want in plain_outputs.items():
        r = c.completions.create(model=MODEL_NAME, prompt=p, max_tokens=40, temperature=0)
        check(r.choices[0].text == want,
              f"ngram speculation gives the plain greedy text ({p[:20]!r})",
              (r.choices[0].text, want))
    r = c.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=40, temperature=0)
    t = r.model_extra["tandem"]
    check(t["drafted"] > 0 and 0 <= t["acceptance_rate"] <= 1 and t["accepted"] <= t["drafted"]
          and t["tokens_per_round"] >= 1, "speculative stats in the response", t)
    off = c.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=40, temperature=0,
                               extra_body={"speculate": False})
    check(off.model_extra["tandem"]["drafted"] == 0 and off.choices[0].text == r.choices[0].text,
          "speculate: false opts out with the same greedy text", off.model_extra["tandem"])
    st = c.chat.completions.create(model=MODEL_NAME, max_tokens=40, temperature=0, stream=True,
                                   messages=[{"role": "user", "content": prompt}])
    text, chunks, final = stream_text(st, chat=True)
    check(final is not None and final.model_extra["tandem"]["drafted"] >= 0 and text,
          "speculative chat stream")
    m = srv.metrics()
    check(m["tandem_spec_drafted_tokens_total"] > 0
          and m["tandem_spec_accepted_tokens_total"] <= m["tandem_spec_drafted_tokens_total"]
          and 0 < m["tandem_spec_acceptance_rate"] <= 1, "speculation counters in /metrics")


@contextlib.contextmanager
def serving(srv, label):
    """The server for a block of checks: killed if still running afterwards, its log
    printed when any check has failed."""
    try:
        yield srv
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
        if failures:
            print(f"---- server log ({label}) ----\n" + srv.log_text()[-4000:])


def finish(t_start, success):
    """Print the time taken and the verdict; exit 1 on any failed check."""
    print(f"{time.time() - t_start:.1f} s")
    if failures:
        print(f"{len(failures)} failure(s): {failures}")
        sys.exit(1)
    print(success)


SPEC_PROMPTS = ["def fibonacci(n):\n", "The quick brown fox jumps over the lazy dog. The quick"]


def main():
    t_start = time.time()
    max_batch, max_queue = 3, 2
    with serving(ServerProcess("--max-batch", max_batch, "--max-queue", max_queue, "--ctx", 256,
                               "--max-body", 100_000, "--kv-cache-tokens", 2048), "plain") as srv:
        greedy_completion, greedy_chat = test_basics(srv)
        test_streaming(srv, greedy_completion, greedy_chat)
        test_errors(srv)
        test_queue_full_and_disconnects(srv, max_batch, max_queue)
        test_metrics_format(srv)
        plain = {p: srv.client.completions.create(model=MODEL_NAME, prompt=p, max_tokens=40,
                                                  temperature=0).choices[0].text
                 for p in SPEC_PROMPTS}
        test_graceful_stop(srv, signal.SIGTERM)

    with serving(ServerProcess("--draft", "ngram", "-k", 4, "--draft-always", "--max-batch", 4), "ngram") as srv:
        test_speculative(srv, plain)
        test_graceful_stop(srv, signal.SIGINT)
    finish(t_start, "all server checks passed")


if __name__ == "__main__":
    main()
