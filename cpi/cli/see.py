"""`cpi list|show|avail`: what the CPI manages and what a cloud-config may name, as the
Salt Cloud drivers' list_nodes, show_instance and avail_* show it — on any cloud."""

from __future__ import annotations

import argparse

from cpi import errors
from cpi.clouds.inventory import KINDS, OFFERS

from .cloud import Opened, fail, print_json

#: The tags shown as columns, in this order (the rest stay in `tags`).
TAG_COLUMNS = ("director_uuid", "agent_id", "deployment", "job", "index")
SINGULAR = {"vm": "vms", "disk": "disks", "stemcell": "stemcells", "snapshot": "snapshots"}


def add_parser(sub) -> None:
    p = sub.add_parser("list", help="list the VMs, disks, stemcells or snapshots the CPI made",
                       description="List what the CPI made, with its BOSH tags, age and state.",
                       epilog="example: cpi list vms --config cpi.json --director-uuid 2b4c...")
    p.add_argument("kind", choices=KINDS)
    _common(p)
    p.add_argument("--director-uuid", help="only what this director made")
    p.set_defaults(func=list_command)
    p = sub.add_parser("show", help="show one VM, disk, stemcell or snapshot in detail",
                       epilog="example: cpi show vm vm-6f1c... --config cpi.json")
    p.add_argument("kind", choices=sorted(SINGULAR))
    p.add_argument("cid")
    _common(p)
    p.set_defaults(func=show_command)
    p = sub.add_parser("avail", help="list the images, sizes, zones or networks a cloud-config may name",
                       epilog="example: cpi avail sizes --config cpi.json")
    p.add_argument("offer", choices=OFFERS)
    _common(p)
    p.set_defaults(func=avail_command)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="cpi.json (default: the local cloud with its defaults)")
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")


def list_command(args: argparse.Namespace) -> int:
    try:
        opened = Opened(args.config)
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


def avail_command(args: argparse.Namespace) -> int:
    try:
        opened = Opened(args.config)
        offers = opened.cloud.available(args.offer)
    except errors.BoshError as exc:
        return fail("avail", exc)
    if args.json:
        print_json(opened.clean([o.wire() for o in offers]))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{args.offer} on the {opened.plugin} cloud ({len(offers)})", title_justify="left")
    for column in ("name", "id", "details"):
        table.add_column(column, overflow="fold")
    for offer in offers:
        details = opened.clean(offer.details)
        table.add_row(offer.name, offer.id or "", ", ".join(f"{k}={v}" for k, v in details.items()))
    Console().print(table)
    return 0
