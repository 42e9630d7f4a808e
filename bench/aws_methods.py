"""Whole-process cost of each CPI method on the aws cloud, against a local moto_server.

Every BOSH call is a new `bin/cpi` process, so what counts is the process: interpreter,
imports, config, the AWS client, the requests and the waits. For each method this prints
wall time and CPU time per process (median and best of N runs) and the AWS requests the
call made (from the count the aws cloud logs), plus the start-up reference points: `info`
on the local cloud, `info` on the aws cloud (no SDK may load), and what a plain boto3 EC2
client costs before its first request.

    .venv/bin/python bench/aws_methods.py [--runs 5]

Figures against moto measure the CPI, not EC2: moto answers in milliseconds and its
instances are running at once, so waits are as short as they can be.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.aws import moto_env
from tests.support.runner import BIN_CPI, DIRECTOR_ENV

PYTHON = str(ROOT / ".venv" / "bin" / "python")


def run_cpi(config: Path, method: str, *arguments) -> tuple[dict, float, float]:
    """One bin/cpi process: (response, wall seconds, CPU seconds of the child)."""
    request = {"method": method, "arguments": list(arguments), "api_version": 2,
               "context": {"director_uuid": "bench", "request_id": "cpi-000001",
                           "vm": {"stemcell": {"api_version": 2}}}}
    before = os.times()
    started = time.perf_counter()
    proc = subprocess.run([str(BIN_CPI), str(config)], input=json.dumps(request).encode(), capture_output=True,
                          env=DIRECTOR_ENV, cwd="/", check=False)
    wall = time.perf_counter() - started
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    doc = json.loads(proc.stdout)
    if doc["error"]:
        raise SystemExit(f"{method} failed: {doc['error']}\n{doc['log']}")
    return doc, wall, cpu


def requests_of(log: str) -> str:
    match = re.search(r"(\d+) AWS requests? \(([^)]*)\)", log)
    return f"{match.group(1)}: {match.group(2)}" if match else "0"


PRELUDE = f"""
import sys, time
sys.path.insert(0, {str(ROOT)!r})
import pydantic, cpi.rpc, cpi.api
from cpi.clouds.aws.job_config import AwsProperties
props = AwsProperties(region="us-east-1", access_key_id="a", secret_access_key="b")
started = time.perf_counter()
"""
NAIVE_CLIENT = PRELUDE + """
import boto3
boto3.session.Session().client("ec2", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
print(time.perf_counter() - started)
"""
CPI_CLIENT = PRELUDE + """
from cpi.clouds.aws.session import Aws
Aws(props).client("ec2")
print(time.perf_counter() - started)
"""


def best_of(runs: int, code: str) -> float:
    """Best of `runs` fresh processes of the time `code` prints."""
    return min(
        float(subprocess.run([PYTHON, "-I", "-c", code], check=True, env=DIRECTOR_ENV, cwd="/",
                             capture_output=True).stdout)
        for _ in range(runs)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="processes per method (default 5)")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-aws-"))
    server = moto_env.MotoServer(workdir / "moto.log")
    try:
        account = moto_env.seed(server.url)
        config = account.write_config(workdir / "cpi.json")
        local_config = workdir / "local.json"
        local_config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {"local": {
            "state_dir": str(workdir / "local")}}}}))
        results: dict[str, list[tuple[float, float, str]]] = {}

        def measure(name: str, cfg: Path, method: str, *arguments):
            doc, wall, cpu = run_cpi(cfg, method, *arguments)
            results.setdefault(name, []).append((wall, cpu, requests_of(doc["log"])))
            return doc["result"]

        light = {"name": moto_env.STEMCELL_NAME, "version": "1", "ami": {moto_env.REGION: account.ami_id}}
        vm_props = {"instance_type": "m5.large", "availability_zone": moto_env.ZONE}
        for run in range(args.runs):
            measure("info (local cloud)", local_config, "info")
            measure("info (aws cloud)", config, "info")
            stemcell = measure("create_stemcell (light)", config, "create_stemcell", "", light)
            network = {"default": {"type": "manual", "ip": f"10.0.1.{10 + run}", "netmask": "255.255.240.0",
                                   "gateway": "10.0.0.1", "dns": ["10.0.0.2"], "default": ["dns", "gateway"],
                                   "cloud_properties": {"subnet": account.subnet_id}}}
            vm_cid = measure("create_vm", config, "create_vm", f"agent-{run}", stemcell, vm_props, network, [], {})[0]
            measure("has_vm", config, "has_vm", vm_cid)
            measure("set_vm_metadata", config, "set_vm_metadata", vm_cid, {"name": "web/0", "deployment": "d"})
            disk_cid = measure("create_disk", config, "create_disk", 2048, {}, vm_cid)
            measure("attach_disk", config, "attach_disk", vm_cid, disk_cid)
            measure("get_disks", config, "get_disks", vm_cid)
            measure("set_disk_metadata", config, "set_disk_metadata", disk_cid, {"deployment": "d"})
            snapshot = measure("snapshot_disk", config, "snapshot_disk", disk_cid, {"deployment": "d", "job": "web",
                                                                                    "index": 0})
            measure("delete_snapshot", config, "delete_snapshot", snapshot)
            measure("detach_disk", config, "detach_disk", vm_cid, disk_cid)
            measure("resize_disk", config, "resize_disk", disk_cid, 4096)
            measure("delete_disk", config, "delete_disk", disk_cid)
            measure("reboot_vm", config, "reboot_vm", vm_cid)
            measure("calculate_vm_cloud_properties", config, "calculate_vm_cloud_properties",
                    {"cpu": 2, "ram": 4096, "ephemeral_disk_size": 10240})
            measure("delete_vm", config, "delete_vm", vm_cid)
            measure("delete_stemcell (light)", config, "delete_stemcell", stemcell)

        print(f"aws cloud against moto_server, {args.runs} bin/cpi processes per method "
              f"(wall and CPU seconds per process: median / best)\n")
        print(f"{'method':32} {'wall med':>8} {'best':>6} {'cpu med':>8} {'best':>6}  AWS requests")
        for name, samples in results.items():
            walls = [s[0] for s in samples]
            cpus = [s[1] for s in samples]
            print(f"{name:32} {statistics.median(walls):8.3f} {min(walls):6.3f} "
                  f"{statistics.median(cpus):8.3f} {min(cpus):6.3f}  {samples[-1][2]}")

        runs = max(3, args.runs)
        naive = best_of(runs, NAIVE_CLIENT)
        ours = best_of(runs, CPI_CLIENT)
        print("\nAn EC2 client from nothing to ready for its first request, in a fresh process after the CPI's")
        print(f"own imports (best of {runs}): import + client construction")
        print(f"  boto3, default client (full EC2 model)        {naive:.3f}s")
        print(f"  the aws cloud (botocore, slim EC2 model)       {ours:.3f}s  ({ours / naive:.2f}x)")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
