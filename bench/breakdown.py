"""Where a VM's and a disk's time goes: the whole bin/cpi process, the time the IaaS itself
took (read from its own records), and the rest, which is the CPI's (#23).

Each round runs create_vm, create_disk, attach_disk, detach_disk, delete_vm and delete_disk
on every cloud asked for, one cloud after the other (so a slow minute of the machine hits
all of them alike); the report gives medians over the rounds, the requests of the last
round's call (from the call's own log line), and the load average before and after.

What "the IaaS's time" is, per cloud (the CPI's time is the whole call minus it):
- openstack (the loopback services): the services' own logs, which keep milliseconds
  (their database keeps whole seconds): from the API's receipt of the request to the line
  saying the work is done (OpenStackCloud says which). `before` is the process's start to
  the IaaS's start (start-up, config, token, lookups, ports), `after` the IaaS's end to the
  process's end (the wait's slack, then what follows). Same host, same clock.
- aws (a moto server started here): moto makes everything at once; the whole call is the
  CPI's, and the requests are what a real EC2 would be sent.
- local: no IaaS; the whole call is the CPI's.

    .venv/bin/python bench/breakdown.py [-n 5] [--clouds openstack,aws,local]
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
REQUESTS = re.compile(r"(\d+) (?:OpenStack|AWS) requests? ?(?:\(([^)]*)\))?")
METHODS = ("create_vm", "create_disk", "attach_disk", "detach_disk", "delete_vm", "delete_disk")


class Call:
    """One bin/cpi process: its result, wall-clock start and end, and requests."""

    def __init__(self, config: Path, home: Path, method: str, *arguments: Any):
        request = json.dumps({"method": method, "arguments": list(arguments), "api_version": 2,
                              "context": {"director_uuid": "bench", "request_id": f"cpi-{uuid.uuid4().hex[:6]}",
                                          "vm": {"stemcell": {"api_version": 2}}}})
        self.started = time.time()
        proc = subprocess.run([str(ROOT / "bin" / "cpi"), str(config)], input=request.encode(), capture_output=True,
                              env={**ENV, "HOME": str(home)}, cwd="/", check=False)
        self.ended = time.time()
        doc = json.loads(proc.stdout)
        if doc["error"]:
            raise SystemExit(f"{method} failed: {doc['error']}\n{doc['log']}")
        self.result = doc["result"]
        found = [*REQUESTS.finditer(doc["log"])]
        self.requests = (f"{found[-1].group(1)} ({found[-1].group(2)})" if found and found[-1].group(2)
                         else found[-1].group(1) if found else "0")

    @property
    def whole(self) -> float:
        return self.ended - self.started


class Row:
    """A method's figures over the rounds: whole call, IaaS (start, end) when known."""

    def __init__(self) -> None:
        self.whole: list[float] = []
        self.iaas: list[float] = []
        self.before: list[float] = []
        self.after: list[float] = []
        self.requests = ""

    def add(self, call: Call, iaas: tuple[float, float] | None) -> None:
        self.whole.append(call.whole)
        self.requests = call.requests
        if iaas is not None:
            start, end = iaas
            self.iaas.append(end - start)
            self.before.append(start - call.started)
            self.after.append(call.ended - end)


def _when(stamp: str | None) -> float:
    """An OpenStack timestamp (UTC, with or without a zone or fraction) as epoch seconds."""
    if not stamp:
        raise ValueError("no timestamp")
    value = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.timestamp()


# ---------------------------------------------------------------- openstack


class ServiceLogs:
    """The loopback services' own logs, read for when they began and finished a piece of
    work (their database keeps whole seconds only; their logs keep milliseconds)."""

    STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) ")
    REQUEST = re.compile(r"\[(?:None )?(req-[0-9a-f-]{36})")
    TOOK = re.compile(r" time: (\d+\.\d+)")

    def __init__(self, directory: Path):
        self.directory = directory

    def find(self, service: str, *needles: str) -> list[str]:
        with open(self.directory / f"{service}.log", errors="replace") as handle:
            return [line for line in handle if all(n in line for n in needles)]

    def when(self, line: str) -> float:
        match = self.STAMP.match(line)
        if not match:
            raise ValueError(f"no time in {line[:80]!r}")
        # the services log in the host's own zone
        return dt.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S.%f").astimezone().timestamp()

    def began(self, line: str) -> float:
        """When an API request line's request arrived: logged at its end, with its duration."""
        took = self.TOOK.search(line)
        return self.when(line) - (float(took.group(1)) if took else 0.0)

    def request_id(self, line: str) -> str:
        match = self.REQUEST.search(line)
        if not match:
            raise ValueError(f"no request id in {line[:120]!r}")
        return match.group(1)


class OpenStackCloud:
    """The IaaS's time from the services' logs (the loopback services only): Nova's POST
    /servers to its compute's "Took ... to build instance" (the server is ACTIVE then),
    DELETE /servers/<id> to "Deleted allocations", Cinder's POST /volumes to "created
    successfully". Attach, detach and a volume's delete leave no line that says they are
    done: their IaaS column stays empty."""

    name = "openstack"

    def __init__(self, work: Path, state: Path):
        from tests.openstack.target import write_config

        self.env = json.loads(state.read_text())
        self.logs = ServiceLogs(Path(self.env["log_dir"]))
        self.config = write_config(work / "openstack.json", self.env, token_cache=True,
                                   token_cache_dir=str(work / "tokens"))
        self.home = work
        ip = ipaddress.ip_address(self.env["free_ip_range"]["start"]) + 150
        self.networks = {"default": {"type": "manual", "ip": str(ip), "netmask": "255.255.255.0",
                                     "gateway": self.env["subnet"]["gateway_ip"], "dns": ["8.8.8.8"],
                                     "default": ["dns", "gateway"],
                                     "cloud_properties": {"net_id": self.env["network"]["id"]}}}
        self.vm_props = {"instance_type": self.env["flavor"]}
        self.stemcell = Call(self.config, self.home, "create_stemcell", "",
                             {"name": "bench", "version": "1", "image_id": self.env["image"]["id"]}).result

    def vm_created(self, vm_cid: str) -> tuple[float, float]:
        built = self.logs.find("nova-compute", f"[instance: {vm_cid}]", "seconds to build instance")[-1]
        post = self.logs.find("nova-api", self.logs.request_id(built), '"POST /v2.1/servers ')[-1]
        return self.logs.began(post), self.logs.when(built)

    def vm_deleted(self, vm_cid: str) -> tuple[float, float]:
        delete = self.logs.find("nova-api", f'"DELETE /v2.1/servers/{vm_cid} ')[-1]
        done = self.logs.find("nova-compute", f"Deleted allocations for instance {vm_cid}")[-1]
        return self.logs.began(delete), self.logs.when(done)

    def disk_created(self, disk_cid: str) -> tuple[float, float]:
        done = self.logs.find("cinder-volume", f"({disk_cid}): created successfully")[-1]
        post = self.logs.find("cinder-api", self.logs.request_id(done), "/volumes HTTP", '"POST ')[-1]
        return self.logs.began(post), self.logs.when(done)

    def attached(self, vm_cid: str) -> None:
        return None

    def detached(self, vm_cid: str) -> None:
        return None

    def disk_deleted(self, disk_cid: str) -> None:
        return None

    def close(self) -> None:
        Call(self.config, self.home, "delete_stemcell", self.stemcell)


# ---------------------------------------------------------------- aws (moto) and local


class PlainCloud:
    """A cloud whose IaaS time is nothing to read: moto (instant) or local (none)."""

    def __init__(self, name: str, config: Path, home: Path, stemcell: str, networks: dict, vm_props: dict,
                 close: Callable[[], None]):
        self.name, self.config, self.home, self.stemcell = name, config, home, stemcell
        self.networks, self.vm_props, self.close = networks, vm_props, close

    def __getattr__(self, name: str) -> Any:
        if name in ("vm_created", "vm_deleted", "attached", "detached", "disk_created", "disk_deleted"):
            return lambda cid: None
        raise AttributeError(name)


def aws_cloud(work: Path) -> PlainCloud:
    from tests.aws import moto_env

    server = moto_env.MotoServer()
    account = moto_env.seed(server.url)
    config = account.write_config(work / "aws.json")
    stemcell = Call(config, work, "create_stemcell", "", {"ami": {moto_env.REGION: account.ami_id}}).result
    networks = {"default": {"type": "manual", "ip": "10.0.1.50", "netmask": "255.255.240.0", "gateway": "10.0.0.1",
                            "dns": ["10.0.0.2"], "default": ["dns", "gateway"],
                            "cloud_properties": {"subnet": account.subnet_id}}}
    return PlainCloud("aws (moto)", config, work, stemcell, networks,
                      {"instance_type": "m5.large", "availability_zone": moto_env.ZONE}, server.stop)


def local_cloud(work: Path) -> PlainCloud:
    state = work / "local-state"
    config = work / "local.json"
    config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {"local": {"state_dir": str(state)}}}}))
    image = work / "image"  # the local cloud takes any file as a stemcell image
    image.write_bytes(b"x" * 4096)
    stemcell = Call(config, work, "create_stemcell", str(image), {"name": "bench", "version": "1"}).result
    networks = {"default": {"type": "manual", "ip": "10.244.0.50", "netmask": "255.255.255.0",
                            "gateway": "10.244.0.1", "cloud_properties": {}}}
    return PlainCloud("local", config, work, stemcell, networks, {}, lambda: None)


# ---------------------------------------------------------------- the rounds


def one_round(cloud: Any, rows: dict[str, Row]) -> None:
    def run(method: str, *arguments: Any) -> Call:
        return Call(cloud.config, cloud.home, method, *arguments)

    create_vm = run("create_vm", f"agent-{uuid.uuid4()}", cloud.stemcell, cloud.vm_props, cloud.networks, [], {})
    vm_cid = create_vm.result[0]
    rows["create_vm"].add(create_vm, cloud.vm_created(vm_cid))
    create_disk = run("create_disk", 1024, {}, vm_cid)
    disk_cid = create_disk.result
    rows["create_disk"].add(create_disk, cloud.disk_created(disk_cid))
    attach = run("attach_disk", vm_cid, disk_cid)
    rows["attach_disk"].add(attach, cloud.attached(vm_cid))
    detach = run("detach_disk", vm_cid, disk_cid)
    rows["detach_disk"].add(detach, cloud.detached(vm_cid))
    delete_vm = run("delete_vm", vm_cid)
    rows["delete_vm"].add(delete_vm, cloud.vm_deleted(vm_cid))
    delete_disk = run("delete_disk", disk_cid)
    rows["delete_disk"].add(delete_disk, cloud.disk_deleted(disk_cid))


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f}" if values else "     -"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=5, help="rounds (medians are reported)")
    parser.add_argument("--clouds", default="openstack,aws,local", help="comma-separated: openstack, aws, local")
    parser.add_argument("--openstack-state", default=str(Path(os.environ.get("OS_STATE_DIR", "/var/tmp/cpi-openstack"))
                                                         / "cpi-openstack.json"))
    args = parser.parse_args()
    wanted = [c.strip() for c in args.clouds.split(",") if c.strip()]
    work = Path(tempfile.mkdtemp(prefix="cpi-breakdown-"))
    work.chmod(0o700)
    makers = {"openstack": lambda: OpenStackCloud(work, Path(args.openstack_state)),
              "aws": lambda: aws_cloud(work), "local": lambda: local_cloud(work)}
    clouds = [makers[name]() for name in wanted]
    rows = {cloud.name: {method: Row() for method in METHODS} for cloud in clouds}
    load_before = os.getloadavg()
    try:
        for _ in range(args.n):
            for cloud in clouds:
                one_round(cloud, rows[cloud.name])
    finally:
        load_after = os.getloadavg()
        for cloud in clouds:
            cloud.close()
    print(f"bench/breakdown.py: {args.n} rounds, interleaved; medians in seconds; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; {os.cpu_count()} cores")
    print(f"{'cloud':12} {'method':12} {'whole':>6} {'IaaS':>6} {'CPI':>6} {'before':>6} {'after':>6}  requests")
    for cloud in clouds:
        for method, row in rows[cloud.name].items():
            cpi = [w - i for w, i in zip(row.whole, row.iaas, strict=False)] if row.iaas else row.whole
            print(f"{cloud.name:12} {method:12} {_median(row.whole)} {_median(row.iaas)} {_median(cpi)} "
                  f"{_median(row.before)} {_median(row.after)}  {row.requests}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
