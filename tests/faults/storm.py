"""What the storm scenarios do on every cloud: one director-like lifecycle per worker, all
at once, and a create_vm killed mid-way."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.support.runner import BIN_CPI, DIRECTOR_ENV, Cpi

WORKERS = 32


def lifecycles(cpi: Cpi, stemcell: str, vm_cloud_properties: dict[str, Any],
               networks_of: Callable[[int], dict[str, Any]], workers: int = WORKERS) -> list[str]:
    """`workers` concurrent create_vm → create_disk → attach → detach → delete_vm →
    delete_disk, each call its own bin/cpi process; worker i's VM is on `networks_of(i)`.
    Returns the VM cids."""

    def lifecycle(i: int) -> str:
        vm_cid, _ = cpi("create_vm", f"agent-storm-{i}", stemcell, vm_cloud_properties, networks_of(i), [],
                        {"bosh": {"group": "storm"}})
        disk_cid = cpi("create_disk", 1024, {}, vm_cid)
        assert cpi("attach_disk", vm_cid, disk_cid)
        cpi("detach_disk", vm_cid, disk_cid)
        cpi("delete_vm", vm_cid)
        cpi("delete_disk", disk_cid)
        return vm_cid

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lifecycle, range(workers)))


def kill_midway(config_path: Path, request: dict[str, Any], after: float) -> None:
    """Start bin/cpi on `request` and SIGKILL it `after` seconds later."""
    proc = subprocess.Popen([str(BIN_CPI), str(config_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=DIRECTOR_ENV, cwd="/")
    proc.stdin.write(json.dumps(request).encode())
    proc.stdin.close()
    time.sleep(after)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()
