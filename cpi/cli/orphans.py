"""`cpi orphans`: what a director's CPI made that the director no longer knows (found by
cpi/operator/orphans.py), listed, and deleted (after confirmation) through bin/cpi, the
same calls a director would make (so every deletion lands in the audit trail)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cpi import errors
from cpi.clouds.inventory import Resource
from cpi.operator import known
from cpi.operator.orphans import DELETERS, find

from .client import Client
from .cloud import Opened
from .output import fail, print_json, reading


def add_parser(sub, name: str, summary: str) -> None:
    p = sub.add_parser(
        name, help=summary,
        description="Resources tagged with the director's UUID whose cid the director does not know.",
        epilog="the complete known set, for each deployment: bosh -d DEP instances --details --json >> known.json; "
               "then once: bosh disks --orphaned --json >> known.json; bosh stemcells --json >> known.json; "
               "cpi orphans --director-uuid $(bosh env --json | jq -r '.Tables[0].Rows[0].uuid') "
               "--known known.json --config cpi.json. An input that is empty, names no cid, is bosh's error "
               "document, truncated, or of another shape is refused (exit 1): nothing is offered for deletion.",
    )
    p.add_argument("--director-uuid", required=True, help="whose resources to look at")
    p.add_argument("--known", required=True, metavar="FILE",
                   help="what the director knows: bosh instances --details / disks --orphaned / stemcells --json "
                        "output, a JSON list of cids, or one cid per line; - for stdin")
    p.add_argument("--config", help="cpi.json (default: the local cloud with its defaults)")
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of a table")
    p.add_argument("--delete", action="store_true", help="delete the orphans (asks first)")
    p.add_argument("--yes", action="store_true", help="with --delete: do not ask")
    p.set_defaults(func=orphans_command)


def orphans_command(args: argparse.Namespace) -> int:
    try:
        text = sys.stdin.read() if args.known == "-" else Path(args.known).read_text()
        known_cids = known.parse(text)
    except (OSError, UnicodeDecodeError, known.KnownError) as exc:
        print(f"cpi orphans: {args.known}: {exc}; nothing listed or deleted", file=sys.stderr)
        return 1
    try:
        opened = Opened(args.config)
        with reading("what the director may have left"):
            found = find(opened.cloud, args.director_uuid, known_cids)
    except errors.BoshError as exc:
        return fail("orphans", exc)
    if args.json and not args.delete:
        print_json(opened.clean([r.wire() for r in found]))
        return 0
    _table(opened, found, len(known_cids))
    if not args.delete or not found:
        return 0
    if not args.yes:
        if not sys.stdin.isatty() or args.known == "-":
            print("cpi orphans: refusing to delete without --yes (no terminal to ask on)", file=sys.stderr)
            return 2
        answer = input(f"Delete these {len(found)} resources? Type 'yes': ")
        if answer.strip() != "yes":
            print("nothing deleted")
            return 1
    client = Client(Path(args.config).resolve() if args.config else None, echo=False)
    failed = 0
    for resource in found:
        response = client.raw(DELETERS[resource.kind + "s"], resource.cid)
        if response["error"]:
            failed += 1
            print(f"{resource.kind} {resource.cid}: {response['error']['type']}: {response['error']['message']}")
        else:
            print(f"deleted {resource.kind} {resource.cid}")
    return 1 if failed else 0


def _table(opened: Opened, found: list[Resource], known_count: int) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"orphans on the {opened.plugin} cloud: {len(found)} (the director knows {known_count} cids)",
                  title_justify="left")
    table.add_column("kind")
    table.add_column("cid", no_wrap=True)
    for column in ("state", "age", "agent_id", "deployment", "job"):
        table.add_column(column, overflow="fold")
    for resource in found:
        tags = opened.clean(resource.tags)
        table.add_row(resource.kind, resource.cid, resource.state, resource.age(),
                      *(tags.get(c, "") for c in ("agent_id", "deployment", "job")))
    Console().print(table)
