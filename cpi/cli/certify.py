"""`cpi certify`: run the lifecycle scenario (cpi/operator/certify.py) against the cloud a
cpi.json names, with a progress bar, then a per-step table (or `--json`), and a guaranteed
cleanup checked the way `cpi orphans` looks. Exit 0 only when every step passed and nothing
is left."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path

from cpi import errors
from cpi.operator.certify import Certify, Journal, Report, Step
from cpi.operator.orphans import find

from .client import Client
from .cloud import Opened
from .output import fail, print_json
from .usage import Formatter

DEFAULT_NETWORKS = {"default": {"type": "dynamic", "cloud_properties": {}}}


def add_parser(sub, name: str, summary: str) -> None:
    p = sub.add_parser(
        name, help=summary,
        description="What a director does to a CPI, step by step through bin/cpi (info, create_stemcell,\n"
                    "create_vm, disks, snapshots, resize, reboot, deletes), timed, with the IaaS requests\n"
                    "each step made. Everything the run made is deleted afterwards whatever happens, and\n"
                    "checked gone. Exit status 0 only when every step passed and nothing is left.",
        formatter_class=Formatter,
        epilog="examples:\n"
               "  cpi certify --stemcell /etc/hostname --stemcell-properties '{\"name\": \"s\", \"version\": \"1\"}'"
               "   # the local cloud\n"
               "  cpi certify --config cpi.json --stemcell \"\" \\\n"
               "    --stemcell-properties '{\"name\": \"bosh-aws-xen-hvm-ubuntu-jammy-go_agent\", \"version\": \"1\", "
               "\"ami\": {\"eu-west-1\": \"ami-0abc\"}}' \\\n"
               "    --vm-type '{\"instance_type\": \"t3.small\"}' \\\n"
               "    --network '{\"default\": {\"type\": \"dynamic\", "
               "\"cloud_properties\": {\"subnet\": \"subnet-0abc\"}}}'",
    )
    p.add_argument("--config", help="cpi.json (default: the local cloud with its defaults)")
    p.add_argument("--stemcell", required=True, metavar="IMAGE_PATH",
                   help="the stemcell image (\"\" for a light stemcell)")
    p.add_argument("--stemcell-properties", required=True, metavar="JSON",
                   help="the stemcell's cloud_properties (stemcell.MF's), as JSON")
    p.add_argument("--vm-type", default="{}", metavar="JSON", help="the VM's cloud_properties (default {})")
    p.add_argument("--disk-type", default="{}", metavar="JSON", help="the disk's cloud_properties (default {})")
    p.add_argument("--network", default=json.dumps(DEFAULT_NETWORKS), metavar="JSON",
                   help="the networks argument of create_vm (default: one dynamic network)")
    p.add_argument("--json", action="store_true", help="print the report as JSON for scripts")
    p.set_defaults(func=certify_command)


def _json_arg(name: str, text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"cpi certify: --{name}: not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise SystemExit(f"cpi certify: --{name}: expected a JSON object")
    return value


def certify_command(args: argparse.Namespace) -> int:
    stemcell_properties = _json_arg("stemcell-properties", args.stemcell_properties)
    vm_type = _json_arg("vm-type", args.vm_type)
    disk_type = _json_arg("disk-type", args.disk_type)
    networks = _json_arg("network", args.network)
    # bin/cpi runs from "/": a relative image path is the caller's.
    image = str(Path(args.stemcell).absolute()) if args.stemcell else ""
    config = Path(args.config).resolve() if args.config else None
    try:
        opened = Opened(args.config)  # fails early on a bad config, names the cloud
    except errors.BoshError as exc:
        return fail("certify", exc)
    def finder(uuid_: str, stemcell_cid: str | None) -> list:
        look = Opened(args.config)
        found = find(look.cloud, uuid_, set())
        found += [r for r in look.cloud.inventory("stemcells")
                  if r.cid == stemcell_cid or r.tags.get("director_uuid") == uuid_]
        return found

    key = str(config) if config else None
    try:
        _clean_up_after_killed_runs(opened.plugin, key, config, finder)
        director_uuid = f"cpi-certify-{uuid.uuid4()}"
        journal = Journal(director_uuid, opened.plugin, key)
        journal.write()
    except errors.BoshError as exc:
        return fail("certify", exc)
    print(f"cpi certify: this run's director_uuid is {director_uuid}: everything it makes is tagged with it, and "
          f"{journal.path} records it; if the run is killed, the next cpi certify of this config cleans up after it "
          f"(or: cpi orphans --director-uuid {director_uuid})", file=sys.stderr, flush=True)
    client = Client(config, echo=False, director_uuid=director_uuid)
    run = Certify(client, finder, opened.plugin, (image, stemcell_properties), vm_type, disk_type, networks, journal)
    report = _run_with_progress(run)
    if args.json:
        print_json(opened.clean(report.wire()))
    else:
        _print(opened, report)
    return 0 if report.ok else 1


def _clean_up_after_killed_runs(cloud: str, key: str | None, config: Path | None, finder) -> None:
    """What earlier runs of this config left when they were killed outright: deleted, as
    their own cleanup would have, before this run makes anything."""
    for record in Journal.left(cloud, key):
        director = str(record.get("director_uuid"))
        made = record.get("made")
        made = made if isinstance(made, dict) else {}
        earlier = Certify(Client(config, echo=False, director_uuid=director), finder, cloud, ("", {}), {}, {}, {},
                          Journal(director, cloud, key))
        earlier.created = {k: v for k, v in made.items() if isinstance(v, str)}
        earlier.cid = dict(earlier.created)
        earlier.cleanup()
        for entry in earlier.report.cleanup:
            print(f"cpi certify: cleaned up after the killed run {director}: {entry['kind']} {entry['cid']} "
                  f"{entry['status']}" + (f" ({entry['error']})" if entry["error"] else ""), file=sys.stderr)
        if not earlier.report.clean:
            print(f"cpi certify: the killed run {director} still left: "
                  + ", ".join(f"{r['kind']} {r['cid']}" for r in earlier.report.leftovers), file=sys.stderr)


def _run_with_progress(run: Certify) -> Report:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    total = len(run.scenario())
    console = Console(stderr=True)  # stdout stays the report (the JSON one for scripts)
    with Progress(TextColumn("[bold]certify[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as progress:
        task = progress.add_task("info", total=total + 1)

        def advance(step: Step) -> None:
            index = [s.name for s in run.report.steps].index(step.name)
            following = run.report.steps[index + 1].name if index + 1 < total and step.status == "passed" else "cleanup"
            progress.update(task, advance=1, description=following)

        report = run.run(progress=advance)
        progress.update(task, completed=total + 1)
    return report


def _print(opened: Opened, report: Report) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"cpi certify on the {report.cloud} cloud (director_uuid {report.director_uuid})",
                  title_justify="left")
    table.add_column("step", no_wrap=True)
    table.add_column("result")
    table.add_column("time", justify="right")
    table.add_column("requests", justify="right")
    table.add_column("created", overflow="fold")  # errors are printed in full below the table
    style = {"passed": "green", "failed": "bold red", "skipped": "dim"}
    for step in report.steps:
        table.add_row(step.name, f"[{style[step.status]}]{step.status}[/]",
                      "" if step.seconds is None else f"{step.seconds:.2f}s",
                      "" if step.requests is None else str(step.requests),
                      step.created or "")
    console.print(table)
    passed = sum(s.status == "passed" for s in report.steps)
    console.print(f"{passed}/{len(report.steps)} steps passed"
                  + (" (interrupted)" if report.interrupted else ""))
    for step in report.steps:
        if step.status == "failed":  # in full: the table folds it in a narrow terminal
            console.print(f"[bold red]failed[/]: {step.name}: {opened.clean(step.error)}", soft_wrap=True)
    for entry in report.cleanup:
        if entry["status"] == "failed":
            console.print(f"cleanup: delete {entry['kind']} {entry['cid']} failed: {opened.clean(entry['error'])}",
                          soft_wrap=True)
        else:
            console.print(f"cleanup: deleted {entry['kind']} {entry['cid']}")
    if report.clean:
        console.print("[green]clean[/]: nothing this run made is left")
    else:
        console.print("[bold red]left behind[/]:")
        for left in report.leftovers:
            console.print(f"  {left['kind']} {left['cid']} ({left['state']})")
    console.print("[green]CERTIFIED[/]" if report.ok else "[bold red]NOT CERTIFIED[/]")
