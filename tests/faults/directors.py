"""Several directors on separate machines, one IaaS account: what tests/faults/
test_storm_directors.py and bench/directors.py run.

A "director" here is what its CPI processes share on their machine: its own HOME (so
its own ~/.cache: AWS locks, token cache) and its own throttle state dir; the only thing
the directors may share is the Redis store, when given one. All of them send through one
rate-limited fault proxy, which stands for the account's limit.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.runner import DIRECTOR_ENV, Cpi


@dataclass
class Outcome:
    wall: float
    calls: int
    failed: list[str]
    requests: int
    forwarded: int
    throttled: int

    def ideal(self, rate: float) -> float:
        """The wall time the proxy's budget allows for the requests that got through."""
        return self.forwarded / rate


def directors(work: Path, count: int, make_config: Callable[[Path], dict[str, Any]], *,
              redis_url: str | None, key_prefix: str, **throttle_settings: Any) -> list[Cpi]:
    """`count` CPIs, each with its own HOME and throttle dir; with `redis_url`, all on it."""
    cpis = []
    for index in range(count):
        home = work / f"director-{index}"
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        document = make_config(home)
        throttle = {"state_dir": str(home / "throttle"), **throttle_settings}
        if redis_url:
            throttle.update(redis_url=redis_url, redis_key_prefix=key_prefix)
        document["cloud"]["properties"]["throttle"] = throttle
        path = home / "cpi.json"
        path.write_text(json.dumps(document))
        cpis.append(Cpi(path, director_uuid=f"director-{index}", env={**DIRECTOR_ENV, "HOME": str(home)}))
    return cpis


def disk_cycle(cpi: Cpi, cycles: int, disk_properties: dict[str, Any]) -> list[str]:
    """create_disk → has_disk → delete_disk, `cycles` times: the errors met (none expected)."""
    errors = []
    for _ in range(cycles):
        made = cpi.call("create_disk", 1024, disk_properties, None, timeout=600)
        if made.error:
            errors.append(f"create_disk: {made.error['message']}")
            continue
        disk_cid = made.doc["result"]
        for method in ("has_disk", "delete_disk"):
            response = cpi.call(method, disk_cid, timeout=600)
            if response.error:
                errors.append(f"{method}: {response.error['message']}")
    return errors


def storm(cpis: list[Cpi], proxy, workers: int, cycles: int, disk_properties: dict[str, Any],
          during: Callable[[], None] | None = None) -> Outcome:
    """`workers` processes per director at once, each running `cycles` disk cycles;
    `during` runs in a thread of its own once the storm has begun (a Redis killed...)."""
    proxy.stats.clear()
    started = time.monotonic()
    with ThreadPoolExecutor(len(cpis) * workers + 1) as pool:
        if during is not None:
            pool.submit(during)
        jobs = [pool.submit(disk_cycle, cpi, cycles, disk_properties) for cpi in cpis for _ in range(workers)]
        failed = [error for job in jobs for error in job.result()]
    wall = time.monotonic() - started
    stats = dict(proxy.stats)
    return Outcome(wall=wall, calls=len(cpis) * workers * cycles * 3, failed=failed, requests=stats.get("requests", 0),
                   forwarded=stats.get("forwarded", 0), throttled=stats.get("throttled", 0))
