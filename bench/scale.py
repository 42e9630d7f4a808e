"""Whether a call's cost stays flat as the account fills up (#23): the per-call methods with
10 and with 1,000 VMs and disks around, and `cpi audit` on a trail of a million lines.

- aws: a moto server started here; has_vm, has_disk, attach_disk, detach_disk, delete_disk
  and delete_vm of one VM and disk, first with 10 other instances and volumes in the
  account, then with 1,000 (moto keeps them in memory: what grows is what a listing would
  read; lookups by id do not).
- local: create_disk, has_disk, attach_disk, detach_disk, delete_disk with 10, then 1,000
  other disks in the state dir.
- openstack: the loopback services (tests/openstack/setup.sh), the same calls and `cpi list
  vms`, with 10 and 1,000 other servers and volumes in the CPI's project.
- audit: `cpi audit` (a whole process, its config's account only, as by default) with each
  filter it has (request id, resource, action, deployment: each 1,000th line a
  set_disk_metadata naming one of 7; --since, --before) and with none (--all: every line,
  as JSON lines, YAML and a table piped and on a terminal), on a trail of 10,000 and of
  1,000,000 lines made in the real writer's format: the median wall time and the peak RSS
  of the process (os.wait4), so that a query holding the whole trail shows.

Every figure is the median of `-n` whole bin/cpi (or `cpi`) processes, and the ratio is the
one at 1,000 (or a million) to the one at 10 (or ten thousand).

    .venv/bin/python bench/scale.py [-n 7] [--only aws,local,openstack,audit] [--no-yaml]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def cpi(config: Path, home: Path, method: str, *arguments: Any) -> tuple[float, Any]:
    request = json.dumps({"method": method, "arguments": list(arguments), "api_version": 2,
                          "context": {"director_uuid": "bench", "request_id": f"cpi-{uuid.uuid4().hex[:6]}"}})
    started = time.perf_counter()
    proc = subprocess.run([str(ROOT / "bin" / "cpi"), str(config)], input=request.encode(), capture_output=True,
                          env={**ENV, "HOME": str(home)}, cwd="/", check=False)
    elapsed = time.perf_counter() - started
    doc = json.loads(proc.stdout)
    if doc["error"]:
        raise SystemExit(f"{method} failed: {doc['error']}\n{doc['log'][-2000:]}")
    return elapsed, doc["result"]


def rounds(n: int, config: Path, home: Path, make_vm, make_disk_args) -> dict[str, float]:
    """Medians of the per-call methods over `n` rounds on one VM and a new disk each round."""
    times: dict[str, list[float]] = {}

    def timed(method: str, *arguments: Any, label: str = "") -> Any:
        elapsed, result = cpi(config, home, method, *arguments)
        times.setdefault(label or method, []).append(elapsed)
        return result

    vm_cid = make_vm()
    for _ in range(n):
        disk_cid = timed("create_disk", *make_disk_args(vm_cid))
        timed("has_vm", vm_cid)
        timed("has_disk", disk_cid)
        timed("attach_disk", vm_cid, disk_cid)
        timed("detach_disk", vm_cid, disk_cid)
        timed("delete_disk", disk_cid)
        timed("has_disk", disk_cid, label="has_disk (deleted)")
        timed("delete_disk", disk_cid, label="delete_disk (deleted)")
    return {method: statistics.median(values) for method, values in times.items()}


def aws(n: int, work: Path) -> list[tuple[str, float, float]]:
    from tests.aws import moto_env

    server = moto_env.MotoServer()
    try:
        account = moto_env.seed(server.url)
        ec2 = account.ec2()
        config = account.write_config(work / "aws.json")
        stemcell = cpi(config, work, "create_stemcell", "", {"ami": {moto_env.REGION: account.ami_id}})[1]
        networks = {"default": {"type": "manual", "ip": "10.0.2.50", "netmask": "255.255.240.0",
                                "gateway": "10.0.0.1", "cloud_properties": {"subnet": account.subnet_id}}}
        vm_props = {"instance_type": "m5.large", "availability_zone": moto_env.ZONE}
        vms: list[str] = []

        def make_vm() -> str:
            if vms:
                return vms[0]
            vms.append(cpi(config, work, "create_vm", "agent-scale", stemcell, vm_props, networks, [], {})[1][0])
            return vms[0]

        def fill(count: int) -> None:
            ec2.run_instances(ImageId=account.ami_id, InstanceType="t3.micro", MinCount=count, MaxCount=count,
                              SubnetId=account.subnet_id,
                              TagSpecifications=[{"ResourceType": "instance",
                                                  "Tags": [{"Key": "agent_id", "Value": "filler"}]}])
            for _ in range(count):
                ec2.create_volume(Size=1, AvailabilityZone=moto_env.ZONE)

        fill(10)
        small = rounds(n, config, work, make_vm, lambda vm: (1024, {}, vm))
        fill(990)
        large = rounds(n, config, work, make_vm, lambda vm: (1024, {}, vm))
        cpi(config, work, "delete_vm", vms[0])
        return [(f"aws {m}", small[m], large[m]) for m in small]
    finally:
        server.stop()


def local(n: int, work: Path) -> list[tuple[str, float, float]]:
    state = work / "local-state"
    config = work / "local.json"
    config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {"local": {"state_dir": str(state)}}}}))
    image = work / "image"  # the local cloud takes any file as a stemcell image
    image.write_bytes(b"x" * 4096)
    stemcell = cpi(config, work, "create_stemcell", str(image), {})[1]
    networks = {"default": {"type": "manual", "ip": "10.244.0.60", "netmask": "255.255.255.0",
                            "gateway": "10.244.0.1", "cloud_properties": {}}}
    vm_cid = cpi(config, work, "create_vm", "agent-scale", stemcell, {}, networks, [], {})[1][0]
    made: list[str] = []

    def fill(count: int) -> None:
        # through the CPI itself, so the state dir holds what it would hold: fast requests,
        # one process each, kept off the clock
        for _ in range(count):
            made.append(cpi(config, work, "create_disk", 1, {}, None)[1])

    fill(10)
    small = rounds(n, config, work, lambda: vm_cid, lambda vm: (64, {}, vm))
    fill(990)
    large = rounds(n, config, work, lambda: vm_cid, lambda vm: (64, {}, vm))
    cpi(config, work, "delete_vm", vm_cid)
    return [(f"local {m}", small[m], large[m]) for m in small]


def openstack(n: int, work: Path) -> list[tuple[str, float, float]]:
    """The loopback services: fillers are servers and volumes of 1 GiB in the CPI's
    project, its quotas raised for the run and put back after; `cpi list vms` is timed too.

    The filler servers ask for a flavor no host can take (`flavor_unschedulable`), so the
    scheduler puts them in ERROR at once: each is a server of the project as the API sees
    it (its mapping, its record, in every listing), and none is built. Built ones take this
    2-core machine about 6 s each (1,000 would be 1.5 hours of nova-compute at full CPU,
    which would also weigh on every figure taken meanwhile)."""
    import concurrent.futures
    import ipaddress

    from tests.openstack.target import Client, write_config

    env = json.loads((Path(os.environ.get("OS_STATE_DIR", "/var/tmp/cpi-openstack")) / "cpi-openstack.json")
                     .read_text())
    user, admin = Client(env), Client(env, admin=True)
    project = env["project_id"]
    config = write_config(work / "openstack.json", env, token_cache=True, token_cache_dir=str(work / "tokens"))
    quotas = {"compute": admin.get("compute", f"/os-quota-sets/{project}")["quota_set"]["instances"],
              "block-storage": admin.get("block-storage", f"/os-quota-sets/{project}")["quota_set"]["volumes"]}
    admin.request("compute", "PUT", f"/os-quota-sets/{project}", json={"quota_set": {"instances": 1200}})
    admin.request("block-storage", "PUT", f"/os-quota-sets/{project}", json={"quota_set": {"volumes": 1200}})
    servers: list[str] = []
    volumes: list[str] = []

    def fill(count: int) -> None:
        for start in range(0, count, 100):
            batch = min(100, count - start)
            user.request("compute", "POST", "/servers", json={"server": {
                "name": "bench-filler", "flavorRef": env["flavors"][env["flavor_unschedulable"]]["id"],
                "imageRef": env["image"]["id"], "networks": "none", "min_count": batch, "max_count": batch}})
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            made = pool.map(lambda _: user.request("block-storage", "POST", "/volumes", json={
                "volume": {"size": 1, "name": "bench-filler"}})["volume"]["id"], range(count))
            volumes.extend(made)
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline:
            listed = user.get("compute", "/servers/detail?name=bench-filler&limit=2000")["servers"]
            building = [s for s in listed if s["status"] == "BUILD"]
            if len(listed) >= len(servers) + count and not building:
                servers[:] = [s["id"] for s in listed]
                return
            time.sleep(2)
        raise SystemExit("fillers still in BUILD after 30 minutes")

    def timed_list() -> float:
        values = []
        for _ in range(n):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "cpi.cli", "list", "vms", "--config", str(config), "--json"],
                           capture_output=True, cwd=ROOT, check=True, env={**os.environ, "HOME": str(work)})
            values.append(time.perf_counter() - started)
        return statistics.median(values)

    try:
        stemcell = cpi(config, work, "create_stemcell", "",
                       {"name": "bench", "version": "1", "image_id": env["image"]["id"]})[1]
        ip = str(ipaddress.ip_address(env["free_ip_range"]["end"]) - 1)  # the tests count up from the start
        networks = {"default": {"type": "manual", "ip": ip, "netmask": "255.255.255.0",
                                "gateway": env["subnet"]["gateway_ip"],
                                "cloud_properties": {"net_id": env["network"]["id"]}}}
        vm: list[str] = []

        def make_vm() -> str:
            if not vm:
                vm.append(cpi(config, work, "create_vm", "agent-scale", stemcell, {"instance_type": env["flavor"]},
                              networks, [], {})[1][0])
            return vm[0]

        fill(10)
        small = rounds(n, config, work, make_vm, lambda v: (1024, {}, v))
        small["cpi list vms"] = timed_list()
        fill(990)
        large = rounds(n, config, work, make_vm, lambda v: (1024, {}, v))
        large["cpi list vms"] = timed_list()
        if vm:
            cpi(config, work, "delete_vm", vm[0])
        cpi(config, work, "delete_stemcell", stemcell)
        return [(f"openstack {m}", small[m], large[m]) for m in small]
    finally:
        # every filler by its name, also those of a fill that was interrupted
        for filler in user.get("compute", "/servers/detail?name=bench-filler&limit=2000")["servers"]:
            user.request("compute", "DELETE", f"/servers/{filler['id']}", ok=(204, 404))
        for volume_id in volumes:
            user.request("block-storage", "DELETE", f"/volumes/{volume_id}", ok=(202, 404))
        deadline = time.monotonic() + 600  # the quotas go back once the fillers are gone
        while user.get("compute", "/servers/detail?name=bench-filler")["servers"] and time.monotonic() < deadline:
            time.sleep(2)
        admin.request("compute", "PUT", f"/os-quota-sets/{project}",
                      json={"quota_set": {"instances": quotas["compute"]}})
        admin.request("block-storage", "PUT", f"/os-quota-sets/{project}",
                      json={"quota_set": {"volumes": quotas["block-storage"]}})


def audit_line_template(account: str | None) -> dict[str, Any]:
    """One line as the real writer (cpi.audit.record) writes it, decoded: the bench's lines
    are copies of it with their own time, request, resource and deployment, in its key order."""
    from cpi import audit as trail_lines

    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "audit" / "audit.log"
        trail_lines.start(method="attach_disk", cloud="aws", request_id="cpi-0000000", director_uuid="bench",
                          account=account, path=path)
        try:
            trail_lines.record("attach", "vol-0", {"old": None, "new": {"vm_cid": "i-0", "device": "/dev/sdf"}},
                               resource_type="disk", request="ec2:AttachVolume")
        finally:
            trail_lines.end()
        return dict(json.loads(path.read_bytes()))


def audit_trail(path: Path, lines: int, account: str | None) -> Path:
    """`lines` lines half a second apart, the last one now; each 1,000th a set_disk_metadata
    naming one of 7 deployments (`dep-0` .. `dep-6`), the others attach_disk."""
    template = audit_line_template(account)
    path.parent.mkdir(mode=0o700)
    start = time.time() - lines * 0.5
    with open(path, "wb") as handle:
        for index in range(lines):
            tagged = index % 1000 == 0
            entry = dict(template)
            entry.update(time=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(start + index * 0.5)) + ".000Z",
                         request_id=f"cpi-{index:07d}", method="set_disk_metadata" if tagged else "attach_disk",
                         deployment=f"dep-{index % 7}" if tagged else None, action="tag" if tagged else "attach",
                         resource_id=f"vol-{index:017x}",
                         changes={"old": None, "new": {"vm_cid": f"i-{index % 997:017x}", "device": "/dev/sdf"}})
            handle.write((json.dumps(entry, ensure_ascii=True) + "\n").encode())
    path.chmod(0o600)
    return path


def audit_run(config: Path, path: Path, flags: list[str]) -> tuple[float, int, int]:
    """One `cpi audit` process: wall seconds, its own peak RSS (bytes, os.wait4) and the
    bytes it printed (read from the pipe as they come, counted, not kept)."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "cpi.cli", "audit", "--config", str(config), "--file", str(path),
                             *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    printed = 0
    while chunk := proc.stdout.read(1 << 20):
        printed += len(chunk)
    error = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0 or not printed:
        raise SystemExit(f"cpi audit {' '.join(flags)}: exit {proc.returncode}, {printed} bytes: {error[-500:]!r}")
    return elapsed, usage.ru_maxrss * 1024, printed


#: Each filter `cpi audit` has, as (label, flags at 10k lines, flags at 1M lines): --json
#: (JSON lines) unless the label says table (piped: rows only; --tty: title, headers, count).
AUDIT_QUERIES = (
    ("--request-id", ["--request-id", "cpi-0009000", "--json"], ["--request-id", "cpi-0900000", "--json"]),
    ("--resource", ["--resource", f"vol-{9000:017x}", "--json"], ["--resource", f"vol-{900000:017x}", "--json"]),
    ("--action tag", ["--action", "tag", "--json"], ["--action", "tag", "--json"]),
    ("--deployment", ["--deployment", "dep-3", "--json"], ["--deployment", "dep-3", "--json"]),
    ("--since 1h", ["--since", "1h", "--json"], ["--since", "1h", "--json"]),
    ("--since 1h, table --tty", ["--since", "1h", "--tty"], ["--since", "1h", "--tty"]),
    ("--before (first 1%)", ["--before", "82.5m", "--json"], ["--before", "8250m", "--json"]),
    ("--all (every line)", ["--all", "--json"], ["--all", "--json"]),
    ("--all, table piped", ["--all"], ["--all"]),
    ("--all, table --tty", ["--all", "--tty"], ["--all", "--tty"]),
    ("--all --yaml", ["--all", "--yaml"], ["--all", "--yaml"]),
)


#: --no-yaml: YAML is pure-Python PyYAML, ~0.5 ms a line: a million lines take minutes even streamed.
SKIP_YAML = False


def audit(n: int, work: Path) -> list[tuple[str, float, float, int, int]]:
    """Each filter of `cpi audit` (its config's account, as by default, unless --all) on a
    trail of 10,000 and one of 1,000,000 lines: median wall time, peak RSS."""
    from cpi import audit as trail_lines
    from cpi import config

    document = {"cloud": {"plugin": "aws", "properties": {"aws": {
        "region": "us-east-1", "access_key_id": "AKIABENCHBENCHBENCH0", "secret_access_key": "bench-secret"}}}}
    config_path = work / "audit-aws.json"
    config_path.write_text(json.dumps(document))
    account = trail_lines.account_of(config.build(document))
    started = time.perf_counter()
    small = audit_trail(work / "audit-10k" / "audit.log", 10_000, account)
    large = audit_trail(work / "audit-1M" / "audit.log", 1_000_000, account)
    print(f"audit trails: {small.stat().st_size / 1e6:.1f} MB and {large.stat().st_size / 1e6:.1f} MB, "
          f"made in {time.perf_counter() - started:.1f} s", file=sys.stderr)

    def median_of(path: Path, flags: list[str]) -> tuple[float, int]:
        runs = [audit_run(config_path, path, flags) for _ in range(n)]
        return statistics.median(r[0] for r in runs), max(r[1] for r in runs)

    rows = []
    for label, small_flags, large_flags in AUDIT_QUERIES:
        if SKIP_YAML and "--yaml" in small_flags:
            continue
        (small_s, small_rss), (large_s, large_rss) = median_of(small, small_flags), median_of(large, large_flags)
        rows.append((f"cpi audit {label}", small_s, large_s, small_rss, large_rss))
        print(f"  {label}: {small_s:.2f} s {small_rss / 2**20:.0f} MiB, {large_s:.2f} s {large_rss / 2**20:.0f} MiB",
              file=sys.stderr)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=7, help="processes per figure (the median is reported)")
    parser.add_argument("--only", default="aws,local,openstack,audit",
                        help="comma-separated: aws, local, openstack, audit")
    parser.add_argument("--no-yaml", action="store_true", help="audit: leave out the --yaml query")
    args = parser.parse_args()
    global SKIP_YAML
    SKIP_YAML = args.no_yaml
    work = Path(tempfile.mkdtemp(prefix="cpi-scale-"))
    work.chmod(0o700)
    load_before = os.getloadavg()
    rows: list[tuple[Any, ...]] = []
    sections = {"aws": aws, "local": local, "openstack": openstack, "audit": audit}
    for name in [s.strip() for s in args.only.split(",") if s.strip()]:
        rows += sections[name](args.n, work)
    load_after = os.getloadavg()
    print(f"bench/scale.py: medians of {args.n} whole processes; load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after; {os.cpu_count()} cores")
    print(f"{'call':36} {'at 10 (10k lines)':>18} {'at 1,000 (1M lines)':>20} {'ratio':>6}   peak RSS (ratio)")
    for name, small, large, *rss in rows:
        memory = f"   {rss[0] / 2**20:.0f} / {rss[1] / 2**20:.0f} MiB ({rss[1] / rss[0]:.2f})" if rss else ""
        print(f"{name:36} {small * 1000:15.1f} ms {large * 1000:17.1f} ms {large / small:6.2f}{memory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
