"""Whole-process cost of one CPI call, as the director pays it, beside the interpreter's floor.

Every CPI call is a new `bin/cpi` process, run with the director's wiped environment (PATH
only, no HOME, cwd /), and the director asks `info` before every operation. This prints,
in one run, the median and best wall time of each call and its ratio to the floor: the
venv interpreter's own `python -I -S -c pass` (issue #12: `info` <= 2x, every local-cloud
method <= 3x).

Sections (each prints its own rows; a section that cannot run says why and is skipped):

- floor and info        the interpreter floor; `info` on the local cloud
- local                 has_vm, create_disk, delete_disk, attach_disk, detach_disk,
                        set_vm_metadata on the local cloud (and create_vm, not a goal)
- aws                   (--aws) has_vm of a missing VM against a moto server, beside a naive
                        boto3 script making the same DescribeInstances
- openstack             (--openstack) has_vm of a missing VM against the loopback OpenStack
                        services, the Keystone token cached

Each call is measured in each mode: `cold` (CPI_HELPER_IDLE_TIMEOUT=0: a fresh interpreter
does everything) and `warm` (the default: bin/cpi hands the call to the warm helper,
cpi.warm, started before the rounds and stopped after them). Runs are interleaved round-robin across
the cases and modes, so a change of load on a shared machine hits every row alike; the load
average is printed before and after.

    .venv/bin/python bench/calls.py [-n 15] [--aws] [--openstack] [--imports] [--checkout DIR | --release ROOT]
                                    [--cold-only]

--imports adds the slowest top-level imports of `info` and `has_vm` (python -X importtime).
--checkout measures another checkout's bin/cpi (a worktree of an older commit, say), for a
before/after comparison with the same interpreter floor. --release ROOT measures what
operators run: the installed release's bin/cpi (ROOT/packages/cpi/app/bin/cpi, which the
job's wrapper execs) with the package's venv, its floor that venv's interpreter.
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
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"
DIRECTOR_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
CONTEXT = {"director_uuid": "bench", "request_id": "cpi-000001", "vm": {"stemcell": {"api_version": 2}}}


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


@dataclass
class Row:
    """One line of the table: wall times (seconds) of one case in one mode."""

    section: str
    name: str
    mode: str = "cold"
    times: list[float] = field(default_factory=list)
    note: str = ""


class Checkout:
    """bin/cpi of a checkout (or of an installed release's package), called as the director
    calls it."""

    def __init__(self, root: Path, env: dict[str, str] | None = None, python: Path | None = None):
        self.root = root
        self.bin_cpi = root / "bin" / "cpi"
        self.python = python or root / ".venv" / "bin" / "python"
        self.env = dict(DIRECTOR_ENV, **(env or {}))
        if python is not None:
            self.env["CPI_PYTHON"] = str(python)  # as the job's wrapper exports it

    def helper(self, action: str) -> str:
        """`running` or `stop` on this checkout's warm helper, as its bin/cpi sees it (the
        client is cpi.warm.client since issue #21, the module cpi.warm before)."""
        code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
                "try:\n    from cpi.warm import client\nexcept ImportError:\n    from cpi import warm as client\n"
                f"print(client.{action}())")
        return subprocess.run([str(self.python), "-I", "-S", "-c", code, str(self.root)],
                              capture_output=True, text=True, env=self.env, cwd="/").stdout.strip()

    def start_helper(self, config: Path, timeout: float = 60) -> None:
        """A cold call starts the helper (unless one still holds its lock, exiting; `info`
        starts none): call until it listens (it warms up first)."""
        deadline = time.monotonic() + timeout
        while True:
            self.call(config, "has_vm", "vm-warming-up")
            if self.helper("running") == "True":
                return
            if time.monotonic() > deadline:
                raise SystemExit(f"the warm helper of {self.root} did not start within {timeout}s")
            time.sleep(0.5)

    def call(self, config: Path, method: str, *arguments, context: dict | None = None) -> tuple[float, dict]:
        request = {"method": method, "arguments": list(arguments), "context": context or CONTEXT, "api_version": 2}
        started = time.perf_counter()
        proc = subprocess.run([str(self.bin_cpi), str(config)], input=json.dumps(request).encode(),
                              capture_output=True, env=self.env, cwd="/", check=False)
        elapsed = time.perf_counter() - started
        doc = json.loads(proc.stdout)
        if doc["error"] is not None:
            raise SystemExit(f"{method} failed: {doc['error']}\n{doc['log']}")
        return elapsed, doc["result"]


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env or DIRECTOR_ENV, cwd="/", check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


# ---------------------------------------------------------------- sections
#
# A section is set up once and then yields one round at a time: `round()` runs each of its
# cases once and appends a time to each of its rows. main() interleaves the rounds of all
# sections, so that no section runs only in a quiet (or a busy) spell.


class Section:
    title = ""

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def row(self, name: str, mode: str = "cold", note: str = "") -> Row:
        row = Row(self.title, name, mode, note=note)
        self.rows.append(row)
        return row

    def round(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Floor(Section):
    title = "floor and info"

    def __init__(self, checkouts: dict[str, Checkout], work: Path):
        super().__init__()
        self.floor = self.row("python -I -S -c pass", note="the floor")
        self.checkouts = checkouts
        self.config = work / "info.json"
        self.config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
            "local": {"state_dir": str(work / "info-state")}}}}))
        self.info = {mode: self.row("info", mode) for mode in checkouts}

    def round(self) -> None:
        self.floor.times.append(timed([str(next(iter(self.checkouts.values())).python), "-I", "-S", "-c", "pass"]))
        for mode, checkout in self.checkouts.items():
            elapsed, _ = checkout.call(self.config, "info")
            self.info[mode].times.append(elapsed)


class Local(Section):
    """The local cloud's methods on one VM; each round makes a disk, attaches, detaches and
    deletes it, so every call acts on real state (a lock file, a record, a sparse file)."""

    title = "local cloud"
    METHODS = ("has_vm", "create_disk", "attach_disk", "detach_disk", "delete_disk", "set_vm_metadata")

    def __init__(self, checkouts: dict[str, Checkout], work: Path, create_vm_every: int):
        super().__init__()
        self.checkouts = checkouts
        self.config = work / "local.json"
        self.config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
            "local": {"state_dir": str(work / "local-state")}}}}))
        image = work / "image"
        image.write_bytes(b"x" * 4096)
        first = next(iter(checkouts.values()))
        _, self.stemcell_cid = first.call(self.config, "create_stemcell", str(image), {})
        _, vm = first.call(self.config, "create_vm", "agent-bench", self.stemcell_cid, {},
                           {"n": {"type": "dynamic"}}, [], {})
        self.vm_cid = vm[0]
        self.first = first
        self.rows_by = {(m, mode): self.row(m, mode) for m in self.METHODS for mode in checkouts}
        self.create_vm_every = create_vm_every
        self.create_vm = {mode: self.row("create_vm", mode, note="built-in agent; not a goal")
                          for mode in checkouts} if create_vm_every else {}
        self.rounds = 0

    def round(self) -> None:
        for mode, cpi in self.checkouts.items():
            config, vm_cid = self.config, self.vm_cid
            results = {}
            for name, arguments in [("has_vm", (vm_cid,)), ("create_disk", (1024, {}, vm_cid))]:
                elapsed, results[name] = cpi.call(config, name, *arguments)
                self.rows_by[(name, mode)].times.append(elapsed)
            disk_cid = results["create_disk"]
            for name, arguments in [("attach_disk", (vm_cid, disk_cid)), ("detach_disk", (vm_cid, disk_cid)),
                                    ("delete_disk", (disk_cid,)),
                                    ("set_vm_metadata", (vm_cid, {"director": "bench", "index": "0"}))]:
                elapsed, _ = cpi.call(config, name, *arguments)
                self.rows_by[(name, mode)].times.append(elapsed)
            if self.create_vm_every and self.rounds % self.create_vm_every == 0:
                elapsed, vm = cpi.call(config, "create_vm", f"agent-{self.rounds}", self.stemcell_cid, {},
                                       {"n": {"type": "dynamic"}}, [], {})
                self.create_vm[mode].times.append(elapsed)
                cpi.call(config, "delete_vm", vm[0])
        self.rounds += 1

    def close(self) -> None:
        self.first.call(self.config, "delete_vm", self.vm_cid)
        self.first.call(self.config, "delete_stemcell", self.stemcell_cid)


NAIVE_BOTO3 = """\
import sys, boto3
endpoint, key_id, secret, instance_id = sys.argv[1:]
ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=endpoint, aws_access_key_id=key_id,
                   aws_secret_access_key=secret)
found = ec2.describe_instances(Filters=[{"Name": "instance-id", "Values": [instance_id]}])["Reservations"]
print(bool(found))
"""


class Aws(Section):
    """has_vm of a VM that is not there, against a moto server: bin/cpi beside the naive
    boto3 script (a plain `python` with site, as anyone would run it) doing the same
    DescribeInstances (issue #12: bin/cpi >= 4x faster)."""

    title = "aws (moto)"
    MISSING = "i-0123456789abcdef0"

    def __init__(self, checkouts: dict[str, Checkout], work: Path):
        super().__init__()
        sys.path.insert(0, str(ROOT))
        from tests.aws import moto_env

        self.moto_env = moto_env
        self.server = moto_env.MotoServer(work / "moto.log")
        account = moto_env.seed(self.server.url)
        self.config = account.write_config(work / "aws.json")
        self.checkouts = checkouts
        self.script = work / "naive_boto3.py"
        self.script.write_text(NAIVE_BOTO3)
        self.naive = self.row("naive boto3 script", note="DescribeInstances, same filter")
        self.has_vm = {mode: self.row("has_vm (missing)", mode) for mode in checkouts}

    def round(self) -> None:
        self.naive.times.append(timed([str(PYTHON), str(self.script), self.server.url, self.moto_env.ACCESS_KEY_ID,
                                       self.moto_env.SECRET_ACCESS_KEY, self.MISSING]))
        for mode, cpi in self.checkouts.items():
            elapsed, found = cpi.call(self.config, "has_vm", self.MISSING)
            assert found is False
            self.has_vm[mode].times.append(elapsed)

    def close(self) -> None:
        self.server.stop()


class OpenStack(Section):
    """has_vm of a VM that is not there against the loopback OpenStack services
    (tests/openstack/setup.sh, run first when they are not up), the Keystone token kept
    between calls as a director's CPI keeps it (issue #12: <= 0.1 s). The unmeasured first
    round fetches the token."""

    title = "openstack"
    MISSING = "7f2b1c1e-0000-4000-8000-000000000000"

    def __init__(self, checkouts: dict[str, Checkout], work: Path):
        super().__init__()
        sys.path.insert(0, str(ROOT))
        from tests.openstack import services, target

        outcome = services.ensure()
        if not outcome.ok:
            raise SystemExit(f"openstack: the loopback services are not available: {outcome.reason}")
        env = json.loads((services.STATE_DIR / "cpi-openstack.json").read_text())
        tokens = work / "openstack-tokens"
        tokens.mkdir(mode=0o700)
        self.config = target.write_config(work / "openstack.json", env, token_cache_dir=str(tokens))
        self.checkouts = checkouts
        self.has_vm = {mode: self.row("has_vm (missing)", mode, note="token cached") for mode in checkouts}

    def round(self) -> None:
        for mode, cpi in self.checkouts.items():
            elapsed, found = cpi.call(self.config, "has_vm", self.MISSING)
            assert found is False
            self.has_vm[mode].times.append(elapsed)


def report(sections: list[Section], floor: float) -> None:
    width = max(5, *(len(row.mode) for section in sections for row in section.rows))
    print(f"{'':22s} {'case':28s} {'mode':{width}s} {'median':>9s} {'best':>9s} {'x floor':>8s}  n")
    for section in sections:
        for row in section.rows:
            if not row.times:
                continue
            median = statistics.median(row.times)
            print(f"{section.title:22s} {row.name:28s} {row.mode:{width}s} {median * 1000:7.1f}ms "
                  f"{min(row.times) * 1000:7.1f}ms {median / floor:7.2f}x  {len(row.times)}"
                  + (f"   ({row.note})" if row.note else ""))


def importtime(checkout: Checkout, config: Path, method: str, *arguments) -> None:
    """The slowest top-level imports of one call, as bin/cpi runs it."""
    sys.path.insert(0, str(ROOT))
    from tests.support.runner import bin_cpi_argv

    request = json.dumps({"method": method, "arguments": list(arguments), "context": CONTEXT}).encode()
    argv = bin_cpi_argv(config, "-X", "importtime", bin_cpi=checkout.bin_cpi)
    argv[0] = str(checkout.python)  # bin/cpi's own choice: CPI_PYTHON, else the checkout's .venv
    proc = subprocess.run(argv, input=request, capture_output=True, env=checkout.env, cwd="/")
    rows = []
    for line in proc.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, name = line.split(":", 1)[1].split("|")
            if not name.startswith("  "):
                rows.append((int(cumulative), name.strip()))
    total = sum(c for c, _ in rows)
    print(f"{method}: {total / 1000:.1f} ms of imports; the slowest top-level ones:")
    for cumulative, name in sorted(rows, reverse=True)[:8]:
        print(f"  {cumulative / 1000:7.1f} ms  {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=15, help="rounds (calls per case and mode)")
    parser.add_argument("--aws", action="store_true",
                        help="add has_vm against a moto server and the naive boto3 script")
    parser.add_argument("--openstack", action="store_true",
                        help="add has_vm against the loopback OpenStack services (root; starts them if needed)")
    parser.add_argument("--imports", action="store_true", help="print the slowest imports of info and has_vm")
    parser.add_argument("--checkout", type=Path, help="measure this checkout's bin/cpi instead")
    parser.add_argument("--release", type=Path, metavar="ROOT",
                        help="measure the installed release under ROOT instead: ROOT/packages/cpi/app/bin/cpi, the "
                             "file the job's wrapper runs, with the package's venv (as create-env or "
                             "`bench/release.py --keep` leave it)")
    parser.add_argument("--create-vm-every", type=int, default=3, help="time create_vm every N rounds (0: never)")
    parser.add_argument("--cold-only", action="store_true", help="no warm mode (a checkout without cpi/warm.py)")
    parser.add_argument("--against", type=Path, metavar="DIR",
                        help="also measure this checkout's bin/cpi (an older commit's worktree) in the same rounds, "
                             "its rows marked @DIR's name: before and after under the same load")
    args = parser.parse_args()

    python = None
    if args.release:
        root = (args.release / "packages" / "cpi" / "app").resolve()
        python = root.parent / "venv" / "bin" / "python"
        if not (root / "bin" / "cpi").is_file() or not python.exists():
            parser.error(f"{args.release} holds no installed release with bin/cpi (packages/cpi/app/bin/cpi, "
                         "packages/cpi/venv): one built before issue #21 ran `python -I -m cpi` from its wrapper")
    else:
        root = (args.checkout or ROOT).resolve()
    idle = {"cold": "0"} if args.cold_only else {"cold": "0", "warm": "600"}
    roots = {"": (root, python)}
    if args.against:
        roots[f"@{args.against.resolve().name}"] = (args.against.resolve(), None)
    checkouts = {f"{mode}{tag}": Checkout(where, {"CPI_HELPER_IDLE_TIMEOUT": seconds}, interpreter)
                 for tag, (where, interpreter) in roots.items() for mode, seconds in idle.items()}
    print(f"bin/cpi of {root}; interpreter {checkouts['cold'].python}; {os.cpu_count()} cores; {load()}")
    work = Path(tempfile.mkdtemp(prefix="cpi-bench-calls-"))
    sections: list[Section] = [Floor(checkouts, work), Local(checkouts, work, args.create_vm_every)]
    if args.aws:
        sections.append(Aws(checkouts, work))
    if args.openstack:
        sections.append(OpenStack(checkouts, work))
    warms = [c for mode, c in checkouts.items() if mode.startswith("warm")]
    try:
        for warm in warms:
            warm.helper("stop")  # a helper of older code would refuse (stale) and restart: start afresh
            warm.start_helper(sections[0].config)
        for section in sections:  # one unmeasured round: files in the page cache, .pyc written
            section.round()
            for row in section.rows:
                row.times.clear()
        for _ in range(args.n):
            for section in sections:
                section.round()
    finally:
        for section in sections:
            section.close()
        for warm in warms:
            warm.helper("stop")
    print(f"after {args.n} rounds: {load()}")
    floor = statistics.median(sections[0].rows[0].times)
    report(sections, floor)
    if args.aws:
        aws = next(section for section in sections if isinstance(section, Aws))
        naive = statistics.median(aws.naive.times)
        for mode, row in aws.has_vm.items():
            print(f"aws has_vm ({mode}) is {naive / statistics.median(row.times):.2f}x faster "
                  "than the naive boto3 script")
    else:
        print("aws (moto): skipped (--aws to run it)")
    if args.openstack:
        openstack = next(section for section in sections if isinstance(section, OpenStack))
        for mode, row in openstack.has_vm.items():
            median = statistics.median(row.times)
            print(f"openstack has_vm ({mode}, token cached): {median:.3f} s (goal <= 0.1 s: "
                  f"{'met' if median <= 0.1 else f'not met, {median / 0.1:.1f}x'})")
    else:
        print("openstack: skipped (--openstack to run it)")
    if args.imports:
        local = sections[1]
        importtime(checkouts["cold"], local.config, "info")
        importtime(checkouts["cold"], local.config, "has_vm", local.vm_cid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
