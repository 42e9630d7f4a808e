"""`cpi show`: one VM, disk, stemcell or snapshot in detail, as the Salt Cloud drivers'
show_instance shows it — on any cloud."""

from __future__ import annotations

import argparse

from . import options, timeout
from .cloud import add_cloud_options
from .output import CliError, print_data, waiting, wants_data
from .reads import open_to_read
from .table import Table, print_table

#: What the operator types, and the kind Cloud.show takes.
SINGULAR = {"vm": "vms", "disk": "disks", "stemcell": "stemcells", "snapshot": "snapshots"}


DESCRIPTION = """Show one VM, disk, stemcell or snapshot as the cloud describes it: its state, creation time, every
tag (metadata) and the cloud's details (size, type, zone, addresses, what it is attached to). Values
are printed as JSON; secrets of the config are masked. Exit status 1 when the cloud has no such
resource."""
EPILOG = "examples: cpi show vm i-0abc123 --config cpi.json;  cpi show disk vol-0abc --yaml"


def add_parser(sub: options.Subparsers, name: str, summary: str) -> None:
    p = sub.add_parser(name, help=summary, description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("kind", choices=sorted(SINGULAR))
    p.add_argument("cid")
    add_cloud_options(p)
    p.set_defaults(func=show_command)


def show_command(args: argparse.Namespace) -> int:
    data = wants_data(args)
    seconds = timeout.seconds(args)
    opened = open_to_read(args.config, seconds)
    with waiting(f"reading {args.kind} {args.cid}", seconds, opened.text):
        resource = opened.cloud.show(SINGULAR[args.kind], args.cid)
    if resource is None:
        raise CliError(f"no {args.kind} {args.cid} on the {opened.plugin} cloud")
    shown = opened.clean(resource.wire())
    if data:
        print_data(shown, args)
        return 0
    table = Table(f"{args.kind} {resource.cid} on the {opened.plugin} cloud", ("field", "value"))
    table.rows += [["state", shown["state"]], ["created_at", shown["created_at"]], ["age", resource.age()]]
    table.rows += [[f"tags.{key}", value] for key, value in sorted(shown["tags"].items())]
    table.rows += [[key, value] for key, value in sorted(shown["details"].items())]
    print_table(table, args)
    return 0
