"""`cpi audit`: read the audit trail (every IaaS mutation the CPI made), filtered by
cpi/operator/audit.py, as a table or JSON lines.

By default only the lines of the config's own cloud and account: one trail may be shared
by several configs (an explicit `audit.path`, or ~/.cache/bosh-cpi/audit for every aws and
openstack config of a user), and an operator asking about one cpi.json means its account.
`--all` shows every line, and only then the table has the cloud and account columns."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cpi import audit
from cpi.operator.audit import Trail, parse_since, select, trail

from . import options
from .output import CliError, picked, print_data, wants_data
from .table import Table, print_table

COLUMNS = ("time", "request", "method", "action", "type", "resource", "old", "new")
#: The table's column names that are not the trail's keys: `--column request` with --json or
#: --yaml picks what the table shows under that heading.
HEADINGS = {"request": "request_id", "type": "resource_type", "resource": "resource_id"}


DESCRIPTION = """Read the audit trail (rotated files included, oldest first) of the cloud cpi.json names: only the
lines of its cloud and account (as the calls work it out from the config: local, the state dir; aws,
the endpoint, region and credentials; openstack, Keystone and the project), unless --all. Lines
written before lines named their account are shown only with --all."""
EPILOG = """examples: cpi audit --config cpi.json --request-id cpi-123456;  cpi audit --config cpi.json
--deployment cf --since 2h;  cpi audit --config cpi.json --resource vol-0abc --before
2026-01-31T12:00Z --json;  cpi audit --config cpi.json --all"""


def add_parser(sub: options.Subparsers, name: str, summary: str) -> None:
    p = sub.add_parser(name, help=summary, description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("--file", help="read this audit file instead of the one cpi.json names")
    p.add_argument("--all", action="store_true",
                   help="every line, of every cloud and account (and lines older than the account field); "
                        "the table gains the cloud and account columns")
    p.add_argument("--deployment", metavar="NAME",
                   help="only the lines of this deployment: those of the calls that name it (set_vm_metadata, "
                        "set_disk_metadata, snapshot_disk) and every line about a resource they touched (its "
                        "create, attach, detach, delete)")
    p.add_argument("--request-id", help="only the lines of this request")
    p.add_argument("--resource", help="only the lines about this resource id")
    p.add_argument("--action", help="only this action (create, delete, attach, ...)")
    p.add_argument("--since", help="only lines since this time: ISO 8601 (2026-01-31T12:00Z) or an age (30m, 2h, 7d)")
    p.add_argument("--before", help="only lines before this time: ISO 8601 (2026-01-31T12:00Z) or an age (30m, 2h, 7d)")
    options.add(p, options.CONFIG, options.OUTPUT, options.COLUMNS)
    p.set_defaults(func=audit_command)


def audit_command(args: argparse.Namespace) -> int:
    from cpi import errors

    data = wants_data(args)
    try:
        own = trail(args.config)
        path = Path(args.file).expanduser().resolve() if args.file else own.path
        since = parse_since(args.since) if args.since else None
        before = parse_since(args.before, option="--before") if args.before else None
    except errors.BoshError as exc:
        raise CliError(exc.message) from None
    except ValueError as exc:
        raise CliError(str(exc), 2) from None
    if args.file and not path.is_file():
        raise CliError(f"--file {args.file}: " + ("not a file" if path.exists() else "no such file"))
    with audit.Snapshot(path) as snapshot:
        def entries() -> Iterator[dict[str, Any]]:
            return select(snapshot, request_id=args.request_id, resource=args.resource, action=args.action,
                          since=since, before=before, deployment=args.deployment,
                          scope=None if args.all else (own.cloud, own.account))

        show(entries, args, data, title(path, own, args.all))
    return 0


def title(path: Path, own: Trail, every: bool) -> str:
    scope = "every cloud and account" if every else (
        f"{own.cloud} {own.account}" if own.account is not None else f"{own.cloud}, which names no account")
    return f"audit trail {path} ({scope})"


def columns(entry: dict[str, Any], names: list[str] | None) -> dict[str, Any]:
    """The entry as it is, or only the `--column`s asked, a table's heading (`request`) or a
    key of the line (`request_id`, `changes.old`) alike."""
    if not names:
        return entry
    return picked({**entry, **{heading: entry.get(key) for heading, key in HEADINGS.items()}}, names)


def show(entries: Callable[[], Iterator[dict[str, Any]]], args: argparse.Namespace, data: bool, heading: str) -> None:
    """The lines as they are read, never all held: JSON lines and YAML one entry at a time;
    a table reads them twice (its column widths and count first, then its rows), as
    bosh's tables are padded to their widest cell and counted at the end."""
    if data and args.json:
        for entry in entries():  # JSON lines, as the trail holds them: a script reads one at a time
            sys.stdout.write(json.dumps(columns(entry, args.columns), sort_keys=False) + "\n")
        return
    if data:
        empty = True
        for entry in entries():  # one item of the YAML list at a time: the same document as the whole list's
            print_data([columns(entry, args.columns)], args)
            empty = False
        if empty:
            print_data([], args)
        return
    headers = (COLUMNS[0], "cloud", "account", *COLUMNS[1:]) if args.all else COLUMNS

    def rows() -> Iterator[list[Any]]:
        for entry in entries():
            changes = entry.get("changes") or {}
            where = [entry.get("cloud"), entry.get("account")] if args.all else []
            yield [entry.get("time"), *where,
                   *(entry.get(k) for k in ("request_id", "method", "action", "resource_type", "resource_id")),
                   changes.get("old"), changes.get("new")]  # whole, as every table's cells

    print_table(Table(heading, headers, noun="line", source=rows), args)
