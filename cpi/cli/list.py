"""`cpi list`: what the CPI made on any cloud, with its BOSH tags, age and state, as the
Salt Cloud drivers' list_nodes shows it."""

from __future__ import annotations

import argparse

from cpi import errors
from cpi.clouds.inventory import KINDS

from .cloud import Opened, add_cloud_options
from .output import fail, print_json, reading

#: The tags shown as columns, in this order (the rest stay in `tags`).
TAG_COLUMNS = ("director_uuid", "agent_id", "deployment", "job", "index")


def add_parser(sub, name: str, summary: str) -> None:
    p = sub.add_parser(name, help=summary,
                       description="List what the CPI made, with its BOSH tags, age and state.",
                       epilog="example: cpi list vms --config cpi.json --director-uuid 2b4c...")
    p.add_argument("kind", choices=KINDS)
    add_cloud_options(p)
    p.add_argument("--director-uuid", help="only what this director made")
    p.set_defaults(func=list_command)


def list_command(args: argparse.Namespace) -> int:
    try:
        opened = Opened(args.config)
        with reading(args.kind):
            resources = opened.cloud.inventory(args.kind)
    except errors.BoshError as exc:
        return fail("list", exc)
    if args.director_uuid:
        resources = [r for r in resources if r.tags.get("director_uuid") == args.director_uuid]
    if args.json:
        print_json(opened.clean([r.wire() for r in resources]))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{args.kind} on the {opened.plugin} cloud ({len(resources)})", title_justify="left")
    table.add_column("cid", no_wrap=True)
    for column in ("state", "age", *TAG_COLUMNS):
        table.add_column(column, overflow="fold")
    for resource in sorted(resources, key=lambda r: r.created_at or ""):
        tags = opened.clean(resource.tags)
        table.add_row(resource.cid, resource.state, resource.age(), *(tags.get(c, "") for c in TAG_COLUMNS))
    Console().print(table)
    return 0
