"""tandem serve kept to its clients: the API key (--api-key / TANDEM_API_KEY:
401 OpenAI errors on /v1/* without it, /health open, /metrics closed unless
--public-metrics), the refusal to listen beyond loopback without a key unless
--insecure, per-request limits answered with 4xx before any work (body size
read from Content-Length, prompt length, stop strings, the number of
alternatives asked for per token), options tandem does not implement refused
rather than ignored (n > 1, best_of > 1), and
slow or stalled clients (a byte per second, headers that never end, a body
that never comes) timed out with 408 without keeping other requests waiting."""
import os
import select
import socket
import subprocess
import threading
import time

import openai

from test_server import (CHAT, COMPLETION, MODEL, MODEL_NAME, TANDEM, ServerProcess, check,
                         finish, parse_metrics, serving)

KEY = "tk-test-0123456789abcdef"


def test_api_key(srv):
    body = {"model": MODEL_NAME, "prompt": "Hello", "max_tokens": 2, "temperature": 0}
    for label, headers in [("no Authorization", {}),
                           ("wrong key", {"Authorization": "Bearer tk-wrong"}),
                           ("key with a prefix of the right one", {"Authorization": "Bearer " + KEY[:-1]}),
                           ("Basic scheme", {"Authorization": "Basic " + KEY})]:
        s, data, hdrs = srv.request("POST", COMPLETION, body=body, headers=headers)
        err = data.get("error", {}) if isinstance(data, dict) else {}
        check(s == 401 and err.get("code") == "invalid_api_key"
              and set(err) == {"message", "type", "param", "code"}
              and hdrs.get("WWW-Authenticate") == "Bearer",
              f"{label} -> 401 invalid_api_key", (s, data))
    for path in ["/v1/models", f"/v1/models/{MODEL_NAME}", "/metrics"]:
        s, _, _ = srv.request("GET", path)
        check(s == 401, f"GET {path} without the key -> 401", s)
    s, data, _ = srv.request("GET", "/health")
    check(s == 200 and data == {"status": "ready"}, "/health needs no key", (s, data))
    s, _, _ = srv.request("GET", "/metrics", headers={"Authorization": "Bearer " + KEY})
    check(s == 200, "/metrics with the key", s)
    # The scheme is case-insensitive (RFC 7235).
    s, _, _ = srv.request("GET", "/v1/models", headers={"Authorization": "bearer " + KEY})
    check(s == 200, "'bearer' in lower case is accepted", s)

    good = openai.OpenAI(base_url=srv.base + "/v1", api_key=KEY, max_retries=0, timeout=60)
    r = good.completions.create(model=MODEL_NAME, prompt="Hello", max_tokens=3, temperature=0)
    check(r.usage.completion_tokens == 3, "OpenAI client with the key completes", r.usage)
    bad = openai.OpenAI(base_url=srv.base + "/v1", api_key="tk-wrong", max_retries=0, timeout=60)
    try:
        bad.models.list()
        check(False, "OpenAI client with a wrong key raises AuthenticationError")
    except openai.AuthenticationError as e:
        check(e.status_code == 401, "OpenAI client with a wrong key raises AuthenticationError")

    # A refused request's body is never parsed: the connection is closed after the
    # 401, so its bytes cannot be taken for another request.
    with socket.create_connection((srv.host, srv.port), timeout=10) as s:
        payload = b'{"prompt": "x"}' + b" " * 2_000_000
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + f"Content-Length: {len(payload)}\r\n\r\n".encode())
        reply = read_reply(s, 10)  # the server closes the connection after it
        check(reply.startswith("HTTP/1.1 401") and "Connection: close" in reply,
              "401 sent before the body, connection closed", reply[:200])
    # A client that sends its whole body at once still gets the refusal (the
    # server drains what arrives instead of resetting the connection).
    for attempt in range(3):
        try:
            s, data, _ = srv.request("POST", COMPLETION, body='{"prompt": "x"}' + " " * 3_000_000)
        except OSError as e:
            s, data = repr(e), None
        check(s == 401, f"401 reaches a client sending a 3 MB body at once ({attempt + 1})", s)


def test_limits(srv):
    auth = {"Authorization": "Bearer " + KEY}
    # Content-Length over --max-body: 413 at once, the body never sent.
    with socket.create_connection((srv.host, srv.port), timeout=10) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                  + KEY.encode() + b"\r\nContent-Length: 999999999999\r\n\r\n")
        reply = read_reply(s, 10)  # headers and body may come in separate segments
        check(reply.startswith("HTTP/1.1 413") and "request_too_large" in reply,
              "Content-Length over the limit -> 413 before the body", reply[:200])

    def post(body, path=COMPLETION):
        s, data, _ = srv.request("POST", path, body=body, headers=auth)
        return s, (data.get("error") or {}) if isinstance(data, dict) else {}

    long_prompt = "word " * 400
    s, err = post({"prompt": long_prompt, "max_tokens": 1})
    check(s == 400 and err.get("code") == "prompt_too_long" and err.get("param") == "prompt",
          "prompt over --max-prompt-tokens -> 400 prompt_too_long", (s, err))
    s, err = post({"prompt": "x", "max_tokens": 100000})
    check(s == 400 and err.get("code") == "context_length_exceeded",
          "max_tokens beyond the context -> 400", (s, err))
    s, err = post({"prompt": "x", "stop": ["a"] * 17})
    check(s == 400 and err.get("param") == "stop", "17 stop strings -> 400", (s, err))
    s, err = post({"prompt": "x", "stop": "s" * 1025})
    check(s == 400 and err.get("param") == "stop", "a 1025-byte stop string -> 400", (s, err))
    s, err = post('{"prompt": ' + "[" * 100_000)
    check(s == 400 and err.get("code") == "invalid_json",
          "JSON nested 100000 deep -> 400 invalid_json", (s, err))
    # Log-probabilities are served, with the alternatives per token bounded as
    # OpenAI bounds them (chat 20, completions 5).
    for label, body, path, param in [
            ("completion logprobs = 6", {"prompt": "x", "logprobs": 6}, COMPLETION, "logprobs"),
            ("chat top_logprobs = 21", {"messages": [{"role": "user", "content": "x"}],
                                        "logprobs": True, "top_logprobs": 21}, CHAT,
             "top_logprobs"),
            ("chat top_logprobs without logprobs",
             {"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}, CHAT,
             "top_logprobs")]:
        s, err = post(body, path)
        check(s == 400 and err.get("param") == param and err.get("code") == "invalid_value",
              f"{label} -> 400 invalid_value", (s, err))
    # Options tandem does not implement are refused, never ignored.
    for label, body, path, param in [
            ("n = 2", {"prompt": "x", "n": 2}, COMPLETION, "n"),
            ("chat n = 3", {"messages": [{"role": "user", "content": "x"}], "n": 3}, CHAT, "n"),
            ("best_of = 2", {"prompt": "x", "best_of": 2}, COMPLETION, "best_of")]:
        s, err = post(body, path)
        check(s == 400 and err.get("param") == param and err.get("code") == "unsupported_value",
              f"{label} -> 400 unsupported_value", (s, err))


def raw_connection(srv):
    return socket.create_connection((srv.host, srv.port), timeout=30)


def read_reply(sock, timeout):
    """Everything the server sends until it closes the connection (or the timeout)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    return data.decode("latin-1")


def test_slow_clients(srv, header_timeout, body_timeout, http_threads):
    """More slow clients than HTTP threads: each is cut off at its deadline with
    408, and a normal request made meanwhile completes."""
    stop = threading.Event()
    replies = {}

    def trickle(i):
        # A byte per second of a request line that never ends (slowloris).
        with raw_connection(srv) as s:
            t0 = time.time()
            line = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000
            for b in line:
                if stop.is_set():
                    break
                try:
                    s.send(bytes([b]))
                except OSError:
                    break
                if select_readable(s):
                    break
                time.sleep(1.0)
            replies[i] = (read_reply(s, 5), time.time() - t0)

    clients = [threading.Thread(target=trickle, args=(i,)) for i in range(http_threads + 2)]
    for c in clients:
        c.start()
    time.sleep(1.5)
    t0 = time.time()
    s, data, _ = srv.request("POST", COMPLETION, headers={"Authorization": "Bearer " + KEY},
                             body={"prompt": "Hello", "max_tokens": 2, "temperature": 0},
                             timeout=60)
    waited = time.time() - t0
    check(s == 200, "a normal request completes while slow clients hold connections",
          (s, data))
    # It may have queued behind the slow clients for at most their deadline.
    check(waited < header_timeout + 10, "it waited at most about the header deadline",
          f"{waited:.1f} s")
    for c in clients:
        c.join(header_timeout + 30)
    stop.set()
    ok = [r for r, t in replies.values()
          if r.startswith("HTTP/1.1 408") and "request_timeout" in r]
    check(len(ok) == len(clients), "every slow client got 408 request_timeout",
          [(r[:60], round(t, 1)) for r, t in replies.values()])
    longest = max(t for _, t in replies.values())
    check(longest < header_timeout + 8, "and was cut off near the header deadline",
          f"{longest:.1f} s")

    # Headers complete, body promised but never sent: 408 after the body deadline.
    with raw_connection(srv) as sock:
        t0 = time.time()
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                     + KEY.encode() + b"\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{\"prompt\"")
        reply = read_reply(sock, body_timeout + 10)
        took = time.time() - t0
    check(reply.startswith("HTTP/1.1 408") and "request_timeout" in reply
          and took < body_timeout + 5, "a body that never comes -> 408",
          (reply[:80], f"{took:.1f} s"))
    # A request line that never ends: 408 too.
    with raw_connection(srv) as sock:
        sock.sendall(b"POST /v1/comp")
        reply = read_reply(sock, header_timeout + 10)
    check(reply.startswith("HTTP/1.1 408") and "request_timeout" in reply,
          "an unfinished request line -> 408", reply[:80])
    # A connection that sends nothing is closed after the idle timeout, no reply.
    with raw_connection(srv) as sock:
        reply = read_reply(sock, 30)
    check(reply == "", "an idle connection is closed without a reply", reply[:80])
    m = parse_metrics(srv.request("GET", "/metrics",
                                  headers={"Authorization": "Bearer " + KEY})[1])
    timeouts = m.get('tandem_requests_rejected_total{reason="timeout"}', 0)
    check(timeouts == len(clients) + 2, "every 408 counted in /metrics", timeouts)


def select_readable(sock):
    r, _, _ = select.select([sock], [], [], 0)
    return bool(r)


def test_listen_policy():
    def run(args, env=None, timeout=30):
        return subprocess.run([TANDEM, "serve", "-m", str(MODEL), "--port", "0", *args],
                              capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})

    t0 = time.time()
    r = run(["--host", "0.0.0.0"])
    lines = r.stderr.strip().splitlines()
    check(r.returncode != 0 and len(lines) == 1 and lines[0].startswith("error:")
          and "0.0.0.0" in lines[0] and "--api-key" in lines[0] and "--insecure" in lines[0],
          "0.0.0.0 without a key is refused with one error line", r.stderr)
    check(time.time() - t0 < 10, "refused before the model loads")
    r = run(["--host", "::"])
    check(r.returncode != 0 and "refusing to listen" in r.stderr, ":: without a key is refused",
          r.stderr)
    r = run(["--api-key", "has space"])
    check(r.returncode != 0 and "API key" in r.stderr, "a key with a space is refused", r.stderr)

    # --insecure, and TANDEM_API_KEY in the environment, both allow 0.0.0.0.
    with serving(ServerProcess("--host", "0.0.0.0", "--insecure", "-q"), "insecure") as srv:
        s, _, _ = srv.request("GET", "/v1/models")
        check(s == 200, "--insecure serves 0.0.0.0 without a key", s)
        check(srv.stop() == 0, "insecure server exits 0")
    os.environ["TANDEM_API_KEY"] = KEY
    try:
        with serving(ServerProcess("--host", "0.0.0.0", "-q"), "env key") as srv:
            s, _, _ = srv.request("GET", "/v1/models")
            check(s == 401, "TANDEM_API_KEY enables the key check", s)
            s, _, _ = srv.request("GET", "/v1/models", headers={"Authorization": "Bearer " + KEY})
            check(s == 200, "TANDEM_API_KEY's key is accepted", s)
            check(srv.stop() == 0, "env-key server exits 0")
    finally:
        del os.environ["TANDEM_API_KEY"]
    with serving(ServerProcess("--api-key", KEY, "--public-metrics", "-q"), "public") as srv:
        s, _, _ = srv.request("GET", "/metrics")
        check(s == 200, "--public-metrics opens /metrics", s)
        s, _, _ = srv.request("GET", "/v1/models")
        check(s == 401, "... but not /v1", s)
        check(srv.stop() == 0, "public-metrics server exits 0")


def main():
    t_start = time.time()
    test_listen_policy()
    header_timeout, body_timeout, http_threads = 3, 3, 4
    with serving(ServerProcess("--api-key", KEY, "--max-prompt-tokens", 64, "--ctx", 256,
                               "--max-body", 4_000_000, "--http-threads", http_threads,
                               "--max-queue", 2, "--max-batch", 2,
                               "--header-timeout", header_timeout, "--body-timeout", body_timeout,
                               "--idle-timeout", 2, "-q"), "secured") as srv:
        test_api_key(srv)
        test_limits(srv)
        test_slow_clients(srv, header_timeout, body_timeout, http_threads)
        s, _, _ = srv.request("GET", "/health")
        check(s == 200, "healthy after it all", s)
        check(srv.stop() == 0, "server exits 0")
    finish(t_start, "all server security checks passed")


if __name__ == "__main__":
    main()
