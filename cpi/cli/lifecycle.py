"""`cpi lifecycle`: a visible lifecycle on the embedded local cloud, every step one bin/cpi
process, showing what each step did on disk."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from . import options
from .client import Client
from .output import CliError

EXAMPLES = """\
examples:
  cpi lifecycle                       # in a new temporary directory
  cpi lifecycle --state-dir ./demo    # keep the state where you can look at it"""


def add_parser(sub: options.Subparsers, name: str, summary: str) -> None:
    p = sub.add_parser(name, help=summary,
                       description="Stemcell, VM, disk, attach, snapshot, resize, detach and delete everything\n"
                       "on the embedded local cloud, each step one bin/cpi process as a director\n"
                       "runs it, showing what it did on disk.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--state-dir", metavar="DIR",
                   help="work directory, relative to the current one or absolute (default: a new temporary one)")
    p.set_defaults(func=lifecycle)


def lifecycle(args: argparse.Namespace) -> int:
    """Stemcell → VM → disk → attach → snapshot → resize → detach → delete everything,
    showing what each step did on disk."""
    if not args.state_dir:  # a temporary one, removed when the lifecycle is over
        with tempfile.TemporaryDirectory(prefix="cpi-demo-") as temporary:
            return _lifecycle(Path(temporary), kept=False)
    # bin/cpi runs from "/": a relative --state-dir is the caller's, made absolute here.
    work = Path(args.state_dir).absolute()
    try:
        work.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise CliError(f"--state-dir {args.state_dir}: exists and is not a directory", 2) from None
    except OSError as exc:
        raise CliError(f"--state-dir {args.state_dir}: {exc.strerror}", 2) from None
    return _lifecycle(work, kept=True)


def _lifecycle(work: Path, kept: bool) -> int:
    state = work / "state"
    config = work / "cpi.json"
    config.write_text(json.dumps({"cloud": {"plugin": "local", "properties": {
        "local": {"state_dir": str(state)},
        "agent": {"mbus": "nats://nats:demo-password@127.0.0.1:4222", "ntp": ["time1.example"]}}}}))
    image = work / "stemcell-image"
    image.write_bytes(os.urandom(64 * 1024))
    cpi = Client(config)
    print(f"Local cloud state dir: {state}\nEvery step below is one bin/cpi process, as a BOSH director runs it.")

    cpi("info")
    stemcell = cpi("create_stemcell", str(image), {"name": "bosh-dummy-stemcell", "version": "1"})
    vm_cid, _ = cpi("create_vm", "agent-demo-0", stemcell, {"cpu": 2, "ram": 1024, "ephemeral_disk": {"size": 512}},
                    {"default": {"type": "manual", "ip": "10.244.0.2", "netmask": "255.255.255.0",
                                 "gateway": "10.244.0.1", "dns": ["10.244.0.1"], "default": ["dns", "gateway"]}},
                    [], {"bosh": {"group": "demo"}})
    vm = json.loads((state / "vms" / vm_cid / "vm.json").read_text())
    print(f"   VM process: pid {vm['pid']}, agent settings in {state / 'vms' / vm_cid / 'cpi-agent-env.json'}")
    print(f"   has_vm → {cpi('has_vm', vm_cid)}")
    cpi("set_vm_metadata", vm_cid, {"director": "demo", "deployment": "demo", "name": "web/0", "index": "0"})
    disk = cpi("create_disk", 2048, {}, vm_cid)
    disk_file = state / "disks" / disk / "disk.img"
    print(f"   disk file {disk_file}: {disk_file.stat().st_size // 2**20} MiB, "
          f"{disk_file.stat().st_blocks * 512 // 1024} KiB allocated (sparse)")
    hint = cpi("attach_disk", vm_cid, disk)
    settings = json.loads((state / "vms" / vm_cid / "cpi-agent-env.json").read_text())
    print(f"   agent settings now list persistent disk {disk} at {hint}: {settings['disks']['persistent']}")
    cpi("get_disks", vm_cid)
    with open(disk_file, "r+b") as handle:
        handle.write(b"data written by the VM")
    snapshot = cpi("snapshot_disk", disk, {"deployment": "demo", "job": "web", "index": 0})
    print(f"   snapshot copy: {_head(state / 'snapshots' / snapshot / 'disk.img', 22)!r}")
    cpi("reboot_vm", vm_cid)
    cpi("detach_disk", vm_cid, disk)
    cpi("resize_disk", disk, 4096)
    print(f"   disk file is now {disk_file.stat().st_size // 2**20} MiB, first bytes {_head(disk_file, 22)!r}")
    cpi("delete_snapshot", snapshot)
    cpi("delete_vm", vm_cid)
    cpi("delete_vm", vm_cid)
    print("   (deleting again succeeds: the director may retry any delete)")
    cpi("has_vm", vm_cid)
    cpi("delete_disk", disk)
    cpi("delete_stemcell", stemcell)
    kinds = ("stemcells", "vms", "disks", "snapshots", "ips", "pending")
    left = {kind: sorted(p.name for p in (state / kind).iterdir()) for kind in kinds}
    leaked = {k: v for k, v in left.items() if v}
    print(f"\nLifecycle complete. Left in {state}: {leaked or 'nothing'}")
    if not kept:
        print(f"Removed the temporary directory {work} (--state-dir DIR keeps it).")
    return 1 if leaked else 0


def _head(path: Path, size: int) -> bytes:
    """The first bytes of a file: the disk files are GiBs (sparse), only these are shown."""
    with open(path, "rb") as handle:
        return handle.read(size)
