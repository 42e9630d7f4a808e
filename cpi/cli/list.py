"""`cpi list`: what BOSH made on any cloud (through this CPI or an official one before a
switch), with its BOSH tags, age and state, as the Salt Cloud drivers' list_nodes shows
it; disks with their role (persistent, root, ephemeral)."""

from __future__ import annotations

import argparse

from cpi.clouds.inventory import KINDS

from . import options, timeout
from .cloud import add_cloud_options
from .output import print_data, reading, wants_data
from .reads import open_to_read
from .table import Table, print_table

#: The tags shown as columns, in this order (the rest stay in `tags`).
TAG_COLUMNS = ("director_uuid", "agent_id", "deployment", "job", "index")


DESCRIPTION = """List what BOSH made (through this CPI, or the official CPI before a switch: found by the tags the
director and the CPIs set), with its BOSH tags, creation time, age and state; disks with their role:
persistent, or a VM's root or ephemeral volume."""
EPILOG = """examples: cpi list vms --config cpi.json --director-uuid 2b4c...;  cpi list disks --column cid
--column deployment | sort -k2"""


def add_parser(sub: options.Subparsers, name: str, summary: str) -> None:
    p = sub.add_parser(name, help=summary, description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("kind", choices=KINDS)
    add_cloud_options(p)
    p.add_argument("--director-uuid", help="only what carries this director's director_uuid (what this CPI made for "
                                           "it, and every snapshot; the official CPI's VMs and volumes carry none)")
    p.set_defaults(func=list_command)


def list_command(args: argparse.Namespace) -> int:
    data = wants_data(args)
    seconds = timeout.seconds(args)
    opened = open_to_read(args.config, seconds)
    with reading(args.kind, seconds, opened.text):
        resources = opened.cloud.inventory(args.kind)
    if args.director_uuid:
        resources = [r for r in resources if r.tags.get("director_uuid") == args.director_uuid]
    resources.sort(key=lambda r: r.created_at or "")
    if data:
        print_data(opened.clean([r.wire() for r in resources]), args)
        return 0
    # a disk's role (persistent, root, ephemeral: cpi.clouds.inventory.ROLES) tells the
    # director's disks from the volumes a VM is made and deleted with
    roles = ("role",) if args.kind == "disks" else ()
    table = Table(f"{args.kind} on the {opened.plugin} cloud",
                  ("cid", "state", *roles, "created_at", "age", *TAG_COLUMNS), noun=args.kind.removesuffix("s"))
    for resource in resources:
        tags = opened.clean(resource.tags)
        table.rows.append([resource.cid, resource.state, *(resource.details.get(r, "") for r in roles),
                           resource.created_at, resource.age(), *(tags.get(c, "") for c in TAG_COLUMNS)])
    print_table(table, args)
    return 0
