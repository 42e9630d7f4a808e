"""`cpi avail`: the images, sizes, zones or networks a cloud-config may name, as the Salt
Cloud drivers' avail_* show them — on any cloud."""

from __future__ import annotations

import argparse

from cpi import errors
from cpi.clouds.inventory import OFFERS

from .cloud import Opened, add_cloud_options
from .output import fail, print_json


def add_parser(sub, name: str, summary: str) -> None:
    p = sub.add_parser(name, help=summary, epilog="example: cpi avail sizes --config cpi.json")
    p.add_argument("offer", choices=OFFERS)
    add_cloud_options(p)
    p.set_defaults(func=avail_command)


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
