"""`cpi certify`: run the lifecycle scenario (cpi/operator/certify.py) against the cloud a
cpi.json names, with a progress bar, then a per-step table (or `--json`), and a guaranteed
cleanup checked the way `cpi orphans` looks. Exit 0 only when every step passed and nothing
is left."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

from cpi import errors, strict_json
from cpi.operator.certify import Certify, Journal, Report, Step
from cpi.operator.orphans import find

from . import options, timeout
from .client import Client
from .cloud import Opened
from .output import CliError, escaped, fail, print_data, wants_data
from .table import Table, print_table
from .usage import Formatter

DEFAULT_NETWORKS = {"default": {"type": "dynamic", "cloud_properties": {}}}


def add_parser(sub: options.Subparsers, name: str, summary: str) -> None:
    p = sub.add_parser(
        name, help=summary,
        description="What a director does to a CPI, step by step through bin/cpi (info, create_stemcell,\n"
                    "create_vm, disks, snapshots, resize, reboot, deletes), timed, with the IaaS requests\n"
                    "each step made. Everything the run made is deleted afterwards whatever happens, and\n"
                    "checked gone. Exit status 0 only when every step passed and nothing is left.\n"
                    "It keeps the config's retry budgets and timeouts, as a director's deploy has them\n"
                    "(it makes real VMs and disks: a throttled account must not fail it half-way);\n"
                    "--timeout SECONDS lowers them for each request, retries included.",
        formatter_class=Formatter,
        epilog="examples:\n"
               "  cpi certify                                       # the local cloud: a stemcell of its own\n"
               "  cpi certify --config cpi.json --stemcell \"\" \\\n"
               "    --stemcell-properties '{\"name\": \"bosh-aws-xen-hvm-ubuntu-jammy-go_agent\", \"version\": \"1\", "
               "\"ami\": {\"eu-west-1\": \"ami-0abc\"}}' \\\n"
               "    --vm-type '{\"instance_type\": \"t3.small\"}' \\\n"
               "    --network '{\"default\": {\"type\": \"dynamic\", "
               "\"cloud_properties\": {\"subnet\": \"subnet-0abc\"}}}'",
    )
    p.add_argument("--stemcell", metavar="IMAGE_PATH",
                   help="the stemcell image (\"\" for a light stemcell; the local cloud: a small image of its own)")
    p.add_argument("--stemcell-properties", metavar="JSON",
                   help="the stemcell's cloud_properties (stemcell.MF's), as JSON (the local cloud: a name and "
                        "version of its own)")
    p.add_argument("--vm-type", default="{}", metavar="JSON", help="the VM's cloud_properties (default {})")
    p.add_argument("--disk-type", default="{}", metavar="JSON", help="the disk's cloud_properties (default {})")
    p.add_argument("--network", default=json.dumps(DEFAULT_NETWORKS), metavar="JSON",
                   help="the networks argument of create_vm (default: one dynamic network)")
    options.add(p, options.CONFIG, options.OUTPUT, options.TIMEOUT)
    p.set_defaults(func=certify_command)


def _json_arg(name: str, text: str) -> dict:
    try:
        value = strict_json.loads(text, f"--{name}")
    except strict_json.InvalidJSON as exc:  # as bin/cpi reads a request: bounded nesting, no NaN
        raise CliError(f"--{name}: not JSON: {exc.reason}", 2) from None
    if not isinstance(value, dict):
        raise CliError(f"--{name}: expected a JSON object", 2)
    return value


def certify_command(args: argparse.Namespace) -> int:
    data = wants_data(args)
    vm_type = _json_arg("vm-type", args.vm_type)
    disk_type = _json_arg("disk-type", args.disk_type)
    networks = _json_arg("network", args.network)
    seconds = timeout.seconds(args, default=None)  # None: the wire's budgets
    config = Path(args.config).resolve() if args.config else None
    try:
        opened = Opened(args.config, timeout=seconds)  # fails early on a bad config, names the cloud
    except errors.BoshError as exc:
        return fail("certify", exc)
    if args.stemcell is not None and args.stemcell_properties is not None:
        # bin/cpi runs from "/": a relative image path is the caller's.
        image = str(Path(args.stemcell).absolute()) if args.stemcell else ""
        stemcell = (image, _json_arg("stemcell-properties", args.stemcell_properties))
        return _certify(args, data, opened, config, stemcell, vm_type, disk_type, networks)
    if opened.plugin != "local" or (args.stemcell is None) != (args.stemcell_properties is None):
        raise CliError(f"the {opened.plugin} cloud needs a stemcell: --stemcell IMAGE_PATH and --stemcell-properties "
                       "JSON (only the local cloud has a stemcell of its own)", 2)
    # the local cloud's stemcell is any file: a small image of this run's own
    with tempfile.TemporaryDirectory(prefix="cpi-certify-") as scratch:
        made = Path(scratch) / "stemcell-image"
        made.write_bytes(os.urandom(64 * 1024))
        stemcell = (str(made), {"name": "bosh-certify-stemcell", "version": "1"})
        return _certify(args, data, opened, config, stemcell, vm_type, disk_type, networks)


def _certify(args: argparse.Namespace, data: bool, opened: Opened, config: Path | None,
             stemcell: tuple[str, dict], vm_type: dict, disk_type: dict, networks: dict) -> int:
    def finder(uuid_: str, stemcell_cid: str | None) -> list:
        look = Opened(args.config, timeout=opened.timeout)
        found = find(look.cloud, uuid_, set())
        found += [r for r in look.cloud.inventory("stemcells")
                  if r.cid == stemcell_cid or r.tags.get("director_uuid") == uuid_]
        return found

    key = str(config) if config else None
    try:
        _clean_up_after_killed_runs(opened.plugin, key, config, finder, opened.overrides)
        director_uuid = f"cpi-certify-{uuid.uuid4()}"
        journal = Journal(director_uuid, opened.plugin, key)
        journal.write()
    except errors.BoshError as exc:
        return fail("certify", exc)
    print(f"cpi certify: this run's director_uuid is {director_uuid}: everything it makes is tagged with it, and "
          f"{journal.path} records it; if the run is killed, the next cpi certify of this config cleans up after it "
          f"(or: cpi orphans --director-uuid {director_uuid})", file=sys.stderr, flush=True)
    client = Client(config, echo=False, director_uuid=director_uuid, context=opened.overrides)
    run = Certify(client, finder, opened.plugin, stemcell, vm_type, disk_type, networks, journal)
    report = _run_with_progress(run)
    if data:
        print_data(opened.clean(report.wire()), args)
    else:
        _print(opened, report, args)
    return 0 if report.ok else 1


def _clean_up_after_killed_runs(cloud: str, key: str | None, config: Path | None,
                                finder: Callable[[str, str | None], list],
                                overrides: dict) -> None:
    """What earlier runs of this config left when they were killed outright: deleted, as
    their own cleanup would have, before this run makes anything."""
    for record in Journal.left(cloud, key):
        director = str(record.get("director_uuid"))
        made = record.get("made")
        made = made if isinstance(made, dict) else {}
        earlier = Certify(Client(config, echo=False, director_uuid=director, context=overrides), finder, cloud,
                          ("", {}), {}, {}, {},
                          Journal(director, cloud, key))
        earlier.created = {k: v for k, v in made.items() if isinstance(v, str)}
        earlier.cid = dict(earlier.created)
        earlier.cleanup()
        for entry in earlier.report.cleanup:
            print(escaped(f"cpi certify: cleaned up after the killed run {director}: {entry['kind']} {entry['cid']} "
                          f"{entry['status']}" + (f" ({entry['error']})" if entry["error"] else "")), file=sys.stderr)
        if not earlier.report.clean:
            print(escaped(f"cpi certify: the killed run {director} still left: "
                          + ", ".join(f"{r['kind']} {r['cid']}" for r in earlier.report.leftovers)), file=sys.stderr)


def _run_with_progress(run: Certify) -> Report:
    """The run, with a progress bar on the terminal's stderr: the step under way, and the
    steps passed of the scenario's as the report's verdict counts them (Report.tally);
    after a failing step, "cleanup"."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)  # stdout stays the report (the JSON one for scripts)
    with Progress(TextColumn("[bold]certify[/] {task.description}"), BarColumn(), TextColumn("{task.fields[tally]}"),
                  TimeElapsedColumn(), console=console, transient=True) as progress:
        names = [name for name, _ in run.scenario()]
        task = progress.add_task(names[0], total=len(names), tally=f"0/{len(names)}")

        def advance(step: Step) -> None:
            index = names.index(step.name)
            following = names[index + 1] if index + 1 < len(names) and step.status == "passed" else "cleanup"
            progress.update(task, completed=run.report.passed, description=following, tally=run.report.tally())

        return run.run(progress=advance)


def _print(opened: Opened, report: Report, args: argparse.Namespace) -> None:
    """The steps as a table (bosh-style, cpi.cli.table), then failures in full, the cleanup
    and the verdict."""
    table = Table(f"cpi certify on the {report.cloud} cloud (director_uuid {report.director_uuid})",
                  ("step", "result", "time", "requests", "created"))
    for step in report.steps:
        table.rows.append([step.name, step.status, None if step.seconds is None else f"{step.seconds:.2f}s",
                           step.requests, step.created])
    print_table(table, args)
    lines = [f"{report.tally()} steps passed"
             + (" (interrupted)" if report.interrupted else "")]
    lines += [f"failed: {step.name}: {opened.clean(step.error)}" for step in report.steps if step.status == "failed"]
    for entry in report.cleanup:
        if entry["status"] == "failed":
            lines.append(f"cleanup: delete {entry['kind']} {entry['cid']} failed: {opened.clean(entry['error'])}")
        else:
            lines.append(f"cleanup: deleted {entry['kind']} {entry['cid']}")
    if report.clean:
        lines.append("clean: nothing this run made is left")
    else:
        lines.append("left behind:")
        lines += [f"  {left['kind']} {left['cid']} ({left['state']})" for left in report.leftovers]
    lines.append("CERTIFIED" if report.ok else "NOT CERTIFIED")
    print("\n".join(escaped(line) for line in lines))  # the cloud's errors and cids, one line each
