"""Whole-process time and OpenStack requests per CPI method, on the openstack cloud.

Every CPI call is a new `bin/cpi` process, as the director runs it; the wall time includes
interpreter start-up, config validation, authentication and the waits. The request count
comes from the call's own log line ("N OpenStack requests (identity 1, compute 3, ...)").
For comparison, the public OpenStack CPIs take 8.5 s (Ruby, 5 s polling) and 13.1 s (Go,
10 s polling) for a create_vm that Nova finishes in 2-5 s, plus 0.6-0.7 s of Ruby start-up
on every call.

    .venv/bin/python bench/openstack_methods.py [-n 3] [--cloud FILE] [--no-token-cache]

FILE describes the cloud as tests/openstack/target.py reads it (default: the loopback
services' $OS_STATE_DIR/cpi-openstack.json, written by tests/openstack/setup.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.openstack.target import write_config

ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
REQUESTS = re.compile(r"(\d+) OpenStack requests? ?(\(([^)]*)\))?")
BASELINES = {"create_vm": "Ruby 8.5 s, Go 13.1 s", "*": "Ruby start-up alone 0.6-0.7 s"}


def call(config: Path, method: str, *args, api_version: int = 2) -> tuple[float, dict, str]:
    request = json.dumps({"method": method, "arguments": list(args), "api_version": api_version,
                          "context": {"director_uuid": "bench", "request_id": "cpi-000001",
                                      "vm": {"stemcell": {"api_version": 2}}}})
    started = time.perf_counter()
    proc = subprocess.run([str(ROOT / "bin" / "cpi"), str(config)], input=request.encode(), capture_output=True,
                          env=ENV, cwd="/", check=False)
    elapsed = time.perf_counter() - started
    doc = json.loads(proc.stdout)
    if doc["error"]:
        raise SystemExit(f"{method} failed: {doc['error']}\n{doc['log']}")
    match = [None, *REQUESTS.finditer(doc["log"])][-1]  # the last count the log gives
    requests = "0"
    if match is not None:
        requests = f"{match.group(1)} ({match.group(3)})" if match.group(3) else match.group(1)
    return elapsed, doc["result"], requests


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=3, help="rounds (median and best are reported)")
    parser.add_argument("--cloud", default=str(Path(os.environ.get("OS_STATE_DIR", "/var/tmp/cpi-openstack"))
                                               / "cpi-openstack.json"))
    parser.add_argument("--index", type=int, default=140, help="free-range offset of the manual IP to use")
    parser.add_argument("--no-token-cache", action="store_true", help="authenticate on every call (token_cache: false)")
    args = parser.parse_args()
    env = json.loads(Path(args.cloud).read_text())
    work = Path(tempfile.mkdtemp(prefix="cpi-os-bench-"))
    config = write_config(work / "cpi.json", env, token_cache=not args.no_token_cache,
                          token_cache_dir=str(work / "tokens"), wait_resource_poll_interval=5)
    import ipaddress

    ip = str(ipaddress.ip_address(env["free_ip_range"]["start"]) + args.index)
    networks = {"default": {"type": "manual", "ip": ip, "netmask": "255.255.255.0",
                            "gateway": env["subnet"]["gateway_ip"], "dns": ["8.8.8.8"], "default": ["dns", "gateway"],
                            "cloud_properties": {"net_id": env["network"]["id"]}}}
    vm_props = {"instance_type": env["flavor"]}
    times: dict[str, list[float]] = {}
    counts: dict[str, str] = {}

    def timed(method: str, *call_args):
        elapsed, result, requests = call(config, method, *call_args)
        times.setdefault(method, []).append(elapsed)
        counts[method] = requests
        return result

    _, stemcell, _ = call(config, "create_stemcell", "",
                          {"name": "bench", "version": "1", "image_id": env["image"]["id"]})
    for _ in range(args.n):
        timed("info")
        vm_cid = timed("create_vm", f"agent-{uuid.uuid4()}", stemcell, vm_props, networks, [], {})[0]
        timed("has_vm", vm_cid)
        timed("set_vm_metadata", vm_cid, {"director": "bench", "deployment": "d", "name": "ig/0", "index": "0"})
        disk_cid = timed("create_disk", 1024, {}, vm_cid)
        timed("has_disk", disk_cid)
        timed("attach_disk", vm_cid, disk_cid)
        timed("get_disks", vm_cid)
        timed("set_disk_metadata", disk_cid, {"director": "bench", "instance_index": "0"})
        snapshot_cid = timed("snapshot_disk", disk_cid, {"deployment": "d", "job": "ig", "index": 0})
        timed("delete_snapshot", snapshot_cid)
        timed("detach_disk", vm_cid, disk_cid)
        timed("resize_disk", disk_cid, 2048)
        timed("reboot_vm", vm_cid)
        timed("delete_vm", vm_cid)
        timed("delete_disk", disk_cid)
        timed("calculate_vm_cloud_properties", {"cpu": 1, "ram": 512, "ephemeral_disk_size": 1024})
    call(config, "delete_stemcell", stemcell)

    print(f"openstack cloud at {env['auth_url']}: whole bin/cpi process per call, {args.n} rounds, "
          f"token_cache {'off' if args.no_token_cache else 'on'}")
    print(f"{'method':32} {'median s':>9} {'best s':>8}  requests (last call)   compare")
    for method, values in times.items():
        compare = BASELINES.get(method, "")
        print(f"{method:32} {statistics.median(values):9.2f} {min(values):8.2f}  {counts[method]:<22} {compare}")
    print(f"(public CPIs: {BASELINES['*']} on every call)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
