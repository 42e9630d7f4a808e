"""Several directors in one AWS account: N "machines" (separate HOME and throttle dirs) ×
P CPI processes each, all through one rate-limited fault proxy in front of moto (the
account's limit), with each machine's file store and with one shared Redis store.

Prints, in one run, for N = 1, 2, 4: wall time, the ideal wall time the proxy's budget
allows (requests that got through ÷ the rate), their ratio, throttled answers and requests
in all, and failed calls; then the goals of issue #13 at the largest N (Redis: wall ≤ 1.3×
ideal, ≥ 3× fewer throttled answers than the file store). Each worker runs disk cycles
(create_disk, has_disk, delete_disk), each call its own bin/cpi process.

    .venv/bin/python bench/directors.py [--directors 1,2,4] [--workers 8] [--cycles 2] [--rate 6]

Needs moto (the test extra) and redis-server (installed from Debian if missing, as root).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.aws import moto_env
from tests.faults import directors
from tests.faults.proxy import FaultProxy
from tests.support import redis_server


def run(account, work: Path, count: int, workers: int, cycles: int, rate: float, redis_url: str | None):
    with FaultProxy(account.endpoint, flavor="aws", rate_limit=rate, burst=max(1.0, rate / 2)) as proxy:
        def make(home):
            return account.config(ec2_endpoint=proxy.url, retry_budget_seconds=900, max_retries=1000,
                                  volume_wait_timeout=900, default_availability_zone=moto_env.ZONE)

        cpis = directors.directors(work / uuid.uuid4().hex[:6], count, make, redis_url=redis_url,
                                   key_prefix=f"bench-{uuid.uuid4().hex[:8]}:")
        return directors.storm(cpis, proxy, workers, cycles, {"type": "gp3"})


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--directors", default="1,2,4", help="director counts, comma-separated")
    parser.add_argument("--workers", type=int, default=8, help="CPI processes at once per director")
    parser.add_argument("--cycles", type=int, default=2, help="disk cycles per process")
    parser.add_argument("--rate", type=float, default=6.0, help="requests/s the proxy (the account) allows")
    args = parser.parse_args()
    counts = [int(n) for n in args.directors.split(",")]
    work = Path(tempfile.mkdtemp(prefix="cpi-directors-"))
    moto = moto_env.MotoServer(work / "moto.log")
    redis = redis_server.server() if redis_server.executable() else None
    try:
        account = moto_env.seed(moto.url)
        print(f"{os.cpu_count()} cores; load {os.getloadavg()[0]:.2f} at start; EC2 limited to {args.rate:g} "
              f"requests/s; {args.workers} processes per director, {args.cycles} disk cycles each")
        print(f"{'directors':>9s} {'store':>6s} {'wall s':>7s} {'ideal s':>8s} {'ratio':>6s} {'throttled':>10s} "
              f"{'requests':>9s} {'failed':>7s}")
        results = {}
        for count in counts:
            for store, url in (("file", None), ("redis", redis.url if redis else None)):
                if store == "redis" and url is None:
                    print(f"{count:9d} {store:>6s}  (no redis-server here)")
                    continue
                outcome = run(account, work, count, args.workers, args.cycles, args.rate, url)
                results[(count, store)] = outcome
                ideal = outcome.ideal(args.rate)
                print(f"{count:9d} {store:>6s} {outcome.wall:7.1f} {ideal:8.1f} {outcome.wall / ideal:6.2f} "
                      f"{outcome.throttled:10d} {outcome.requests:9d} {len(outcome.failed):7d}", flush=True)
                for failure in outcome.failed[:3]:
                    print(f"{'':17s} failed: {failure[:300]}")
        top = max(counts)
        if (top, "file") in results and (top, "redis") in results:
            file, shared = results[(top, "file")], results[(top, "redis")]
            ratio = shared.wall / shared.ideal(args.rate)
            fewer = file.throttled / shared.throttled if shared.throttled else float("inf")
            print(f"at {top} directors, redis: wall {ratio:.2f}× ideal "
                  f"(goal ≤ 1.3: {'met' if ratio <= 1.3 else 'not met'});"
                  f" {fewer:.1f}× fewer throttled answers than the file store (goal ≥ 3: "
                  f"{'met' if fewer >= 3 else 'not met'})")
        print(f"load {os.getloadavg()[0]:.2f} at the end ({time.strftime('%H:%M:%S')})")
    finally:
        moto.stop()
        if redis is not None:
            redis.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
