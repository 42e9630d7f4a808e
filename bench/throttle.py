"""N parallel create_vm/delete_vm cycles against a rate-limited EC2 (moto behind the fault
proxy), with and without the backoff shared across CPI processes.

Prints, for each mode: wall time, the ideal time (requests the CPI needed ÷ the allowed
rate), their ratio, throttled responses received, and calls that failed.

    .venv/bin/python bench/throttle.py [-n 16] [--rate 10]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.aws import moto_env
from tests.faults.proxy import FaultProxy
from tests.support.runner import Cpi


def run(account, n: int, rate: float, shared: bool, work: Path) -> dict:
    with FaultProxy(account.endpoint, flavor="aws", rate_limit=rate, burst=max(1.0, rate / 2)) as proxy:
        config = account.config(ec2_endpoint=proxy.url, retry_budget_seconds=600, max_retries=1000,
                                vm_wait_timeout=600, volume_wait_timeout=600)
        config["cloud"]["properties"]["throttle"] = {"enabled": shared, "state_dir": str(work / "throttle"),
                                                     "max_rate": rate * 2}
        path = work / f"cpi-{'shared' if shared else 'alone'}.json"
        path.write_text(json.dumps(config))
        cpi = Cpi(path)
        stemcell = cpi("create_stemcell", "", {"ami": {moto_env.REGION: account.ami_id}})
        network = {"default": {"type": "dynamic", "cloud_properties": {"subnet": account.subnet_id}}}
        proxy.stats.clear()

        def cycle(i: int) -> bool:
            response = cpi.call("create_vm", f"agent-{i}", stemcell,
                                {"instance_type": "m5.large", "availability_zone": moto_env.ZONE}, network, [], {})
            if response.error:
                return False
            return cpi.call("delete_vm", response.doc["result"][0]).error is None

        started = time.monotonic()
        with ThreadPoolExecutor(n) as pool:
            results = list(pool.map(cycle, range(n)))
        wall = time.monotonic() - started
        stats = dict(proxy.stats)
    needed = stats.get("forwarded", 0)
    ideal = needed / rate
    return {"wall": wall, "ideal": ideal, "ratio": wall / ideal if ideal else float("nan"),
            "throttled": stats.get("throttled", 0), "requests": stats.get("requests", 0),
            "failed": results.count(False)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=16, help="parallel create/delete cycles")
    parser.add_argument("--rate", type=float, default=10.0, help="requests/s the proxy allows")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cpi-throttle-"))
    server = moto_env.MotoServer(work / "moto.log")
    try:
        account = moto_env.seed(server.url)
        print(f"{args.n} parallel create_vm+delete_vm cycles, EC2 limited to {args.rate:g} requests/s")
        print(f"{'mode':18s} {'wall s':>7s} {'ideal s':>8s} {'ratio':>6s} {'throttled':>10s} {'requests':>9s} "
              f"{'failed':>7s}")
        for shared in (False, True):
            r = run(account, args.n, args.rate, shared, work)
            mode = "shared backoff" if shared else "each on its own"
            print(f"{mode:18s} {r['wall']:7.1f} {r['ideal']:8.1f} {r['ratio']:6.2f} {r['throttled']:10d} "
                  f"{r['requests']:9d} {r['failed']:7d}")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
