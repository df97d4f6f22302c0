"""`tandem bench membw`: the streaming read bandwidth, and beside it the round trip of a
cache line between the pool's two threads (which placement the host gave them: one
core complex or two, docs/benchmarks.md). Checked: both figures printed and in the
JSON, positive and finite; no round trip with one thread (there is no second thread
to answer); a bad buffer size refused by name. No timing thresholds: the figures
are the machine's, and performance lives in docs/benchmarks.md."""
import json
import math
import subprocess
import time

from test_server import TANDEM, check, finish


def run(*args):
    p = subprocess.run([TANDEM, "bench", "membw", *map(str, args)], capture_output=True,
                       text=True, timeout=300)
    data = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else None
    return p, data


def main():
    t0 = time.time()
    p, two = run("-t", 2, "--mb", 16)
    check(p.returncode == 0, "two threads: exit 0", p.stderr)
    if two:
        check(two.get("threads") == 2, "two threads: the JSON names them", two)
        bw = two.get("bandwidth_gb_s", 0)
        check(bw > 0 and math.isfinite(bw), "two threads: a bandwidth", two)
        rt = two.get("handoff_round_trip_ns")
        # Absent only if the host kept the second thread off a core for 100 ms
        # in every batch; a round trip is at least two cache-line transfers.
        check(rt is not None and rt > 0 and math.isfinite(rt), "two threads: a round trip", two)
        check("core-to-core round trip:" in p.stdout, "two threads: the round trip printed",
              p.stdout)

    p, one = run("-t", 1, "--mb", 16)
    check(p.returncode == 0, "one thread: exit 0", p.stderr)
    if one:
        check("handoff_round_trip_ns" not in one, "one thread: no round trip", one)
        check("core-to-core" not in p.stdout, "one thread: none printed", p.stdout)

    p, _ = run("--mb", 1)
    check(p.returncode != 0 and "--mb" in p.stderr, "a buffer below 16 MiB refused by name",
          p.stderr)
    finish(t0, "bench membw: bandwidth and round trip reported")


if __name__ == "__main__":
    main()
