"""`cpi show`: one VM, disk, stemcell or snapshot in detail, as the Salt Cloud drivers'
show_instance shows it — on any cloud."""

from __future__ import annotations

import argparse

from cpi import errors

from .cloud import Opened, add_cloud_options
from .output import fail, print_json

#: What the operator types, and the kind Cloud.show takes.
SINGULAR = {"vm": "vms", "disk": "disks", "stemcell": "stemcells", "snapshot": "snapshots"}


def add_parser(sub, name: str, summary: str) -> None:
    p = sub.add_parser(name, help=summary, epilog="example: cpi show vm vm-6f1c... --config cpi.json")
    p.add_argument("kind", choices=sorted(SINGULAR))
    p.add_argument("cid")
    add_cloud_options(p)
    p.set_defaults(func=show_command)


def show_command(args: argparse.Namespace) -> int:
    try:
        opened = Opened(args.config)
        resource = opened.cloud.show(SINGULAR[args.kind], args.cid)
    except errors.BoshError as exc:
        return fail("show", exc)
    if resource is None:
        print(f"cpi show: no {args.kind} {args.cid} on the {opened.plugin} cloud")
        return 1
    shown = opened.clean(resource.wire())
    if args.json:
        print_json(shown)
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{args.kind} {resource.cid}", show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    table.add_row("state", shown["state"])
    table.add_row("age", resource.age())
    table.add_row("created_at", str(shown["created_at"]))
    for key, value in sorted(shown["tags"].items()):
        table.add_row(f"tags.{key}", str(value))
    for key, value in sorted(shown["details"].items()):
        table.add_row(key, str(value))
    Console().print(table)
    return 0
