"""`cpi`: the human side of the CPI — call one method, watch a lifecycle, list a cloud's
properties. BOSH never runs this; it runs bin/cpi."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN_CPI = ROOT / "bin" / "cpi"


class Client:
    """Spawns bin/cpi once per call with the director's wiped environment."""

    def __init__(self, config: Path | None, api_version: int = 2, echo: bool = True):
        self.config = config
        self.api_version = api_version
        self.echo = echo

    def raw(self, method: str, *arguments: Any) -> dict:
        request = {
            "method": method,
            "arguments": list(arguments),
            "context": {"director_uuid": "cpi-cli", "request_id": f"cpi-{os.getpid() % 1000000:06d}",
                        "vm": {"stemcell": {"api_version": 2}}},
            "api_version": self.api_version,
        }
        argv = [str(BIN_CPI)] + ([str(self.config)] if self.config else [])
        started = time.monotonic()
        proc = subprocess.run(argv, input=json.dumps(request).encode(), capture_output=True,
                              env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, cwd="/")
        elapsed = time.monotonic() - started
        response = json.loads(proc.stdout)
        if self.echo:
            shown = json.dumps(arguments)
            print(f"\n→ {method} {shown if len(shown) < 160 else shown[:157] + '...'}")
            if response["error"]:
                err = response["error"]
                print(f"← ERROR {err['type']}: {err['message']} (ok_to_retry={err['ok_to_retry']})  [{elapsed:.2f}s]")
            else:
                print(f"← {json.dumps(response['result'])}  [{elapsed:.2f}s, exit {proc.returncode}]")
        return response

    def __call__(self, method: str, *arguments: Any) -> Any:
        response = self.raw(method, *arguments)
        if response["error"]:
            raise SystemExit(f"{method} failed: {response['error']['message']}\n{response['log']}")
        return response["result"]


def lifecycle(args: argparse.Namespace) -> int:
    """Stemcell → VM → disk → attach → snapshot → resize → detach → delete everything,
    showing what each step did on disk."""
    work = Path(args.state_dir) if args.state_dir else Path(tempfile.mkdtemp(prefix="cpi-demo-"))
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
    left = {kind: sorted(p.name for p in (state / kind).iterdir()) for kind in ("stemcells", "vms", "disks", "snapshots", "ips", "pending")}
    leaked = {k: v for k, v in left.items() if v}
    print(f"\nLifecycle complete. Left in {state}: {leaked or 'nothing'}")
    return 1 if leaked else 0


def _head(path: Path, size: int) -> bytes:
    """The first bytes of a file: the disk files are GiBs (sparse), only these are shown."""
    with open(path, "rb") as handle:
        return handle.read(size)


def call(args: argparse.Namespace) -> int:
    arguments = [json.loads(a) for a in args.arguments]
    response = Client(Path(args.config) if args.config else None, args.api_version, echo=False).raw(args.method, *arguments)
    print(json.dumps(response, indent=2))
    return 0 if response["error"] is None else 1


def props(args: argparse.Namespace) -> int:
    from cpi.clouds import load_cloud
    from cpi.reference import markdown

    sys.stdout.write(markdown(load_cloud(args.cloud)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cpi", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("lifecycle", help="run a visible lifecycle on the embedded local cloud")
    p.add_argument("--state-dir", help="work directory (default: a new temporary one)")
    p.set_defaults(func=lifecycle)
    p = sub.add_parser("call", help="call one CPI method through bin/cpi and print the response")
    p.add_argument("method")
    p.add_argument("arguments", nargs="*", help="each argument as JSON, e.g. '\"vm-1\"' or '{}'")
    p.add_argument("--config", help="cpi.json (default: the local cloud with its defaults)")
    p.add_argument("--api-version", type=int, default=2)
    p.set_defaults(func=call)
    p = sub.add_parser("props", help="print a cloud's config and cloud_properties reference (Markdown)")
    p.add_argument("cloud", nargs="?", default="local")
    p.set_defaults(func=props)
    try:
        from cpi.release.cli import add_parser as add_release_parser
    except ImportError:
        add_release_parser = None
    if add_release_parser:
        add_release_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
