"""`cpi avail`: the images, sizes, zones or networks a cloud-config may name, as the Salt
Cloud drivers' avail_* show them — on any cloud."""

from __future__ import annotations

import argparse
import fnmatch
import re

from cpi.clouds.inventory import OFFERS

from . import options, timeout
from .cloud import add_cloud_options
from .output import print_data, waiting, wants_data
from .reads import open_to_read
from .table import Table, print_table, text

DESCRIPTION = """List what a cloud-config may name on the cloud: images (AMIs, Glance images), sizes (instance types,
flavors), availability zones, networks (subnets, Neutron networks), with their ids and what the
cloud says of them."""
EPILOG = "examples: cpi avail sizes --config cpi.json --filter 'm5.*';  cpi avail zones --json"


def add_parser(sub: options.Subparsers, name: str, summary: str) -> None:
    p = sub.add_parser(name, help=summary, description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("offer", choices=OFFERS)
    p.add_argument("--filter", metavar="PATTERN",
                   help="only those whose name or id matches this shell pattern (m5.*, *large), case-insensitive")
    add_cloud_options(p)
    p.set_defaults(func=avail_command)


def natural(name: str) -> list:
    """The order a person reads sizes in: the numbers in a name compared as numbers
    (m5.2xlarge before m5.12xlarge, r5.4xlarge before r5.16xlarge), the rest as text,
    whatever order the cloud answered in."""
    parts: list = re.split(r"(\d+)", name.lower())
    parts[1::2] = [int(number) for number in parts[1::2]]
    return parts


def avail_command(args: argparse.Namespace) -> int:
    data = wants_data(args)
    seconds = timeout.seconds(args)
    opened = open_to_read(args.config, seconds)
    with waiting(f"reading {args.offer}", seconds, opened.text):
        offers = opened.cloud.available(args.offer)
    if args.filter:
        pattern = args.filter.lower()
        offers = [o for o in offers if fnmatch.fnmatchcase(o.name.lower(), pattern)
                  or fnmatch.fnmatchcase((o.id or "").lower(), pattern)]
    offers.sort(key=lambda o: natural(o.name))
    if data:
        print_data(opened.clean([o.wire() for o in offers]), args)
        return 0
    table = Table(f"{args.offer} on the {opened.plugin} cloud", ("name", "id", "details"),
                  noun=args.offer.removesuffix("s"))
    for offer in offers:
        details = opened.clean(offer.details)
        table.rows.append([offer.name, offer.id, " ".join(f"{k}={text(v)}" for k, v in details.items())])
    print_table(table, args)
    return 0

