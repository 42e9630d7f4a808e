"""`cpi audit`: read the audit trail (every IaaS mutation the CPI made), filtered by
cpi/operator/audit.py, as a table or JSON lines."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cpi.operator.audit import parse_since, select, trail_path

from . import options
from .output import CliError, print_data, short, wants_data
from .table import Table, print_table


def add_parser(sub, name: str, summary: str) -> None:
    p = sub.add_parser(
        name, help=summary,
        description="Read the audit trail (rotated files included, oldest first) of the cloud cpi.json names.",
        epilog="examples: cpi audit --config cpi.json --request-id cpi-123456;  "
               "cpi audit --config cpi.json --resource vol-0abc --since 2h --json",
    )
    p.add_argument("--file", help="read this audit file instead of the one cpi.json names")
    p.add_argument("--request-id", help="only the lines of this request")
    p.add_argument("--resource", help="only the lines about this resource id")
    p.add_argument("--action", help="only this action (create, delete, attach, ...)")
    p.add_argument("--since", help="only lines since this time: ISO 8601 (2026-01-31T12:00Z) or an age (30m, 2h, 7d)")
    options.add(p, options.CONFIG, options.OUTPUT, options.COLUMNS)
    p.set_defaults(func=audit_command)


def audit_command(args: argparse.Namespace) -> int:
    from cpi import errors

    data = wants_data(args)
    try:
        path = Path(args.file).expanduser().resolve() if args.file else trail_path(args.config)
        since = parse_since(args.since) if args.since else None
    except errors.BoshError as exc:
        raise CliError(exc.message) from None
    except ValueError as exc:
        raise CliError(str(exc), 2) from None
    if args.file and not path.is_file():
        raise CliError(f"--file {args.file}: " + ("not a file" if path.exists() else "no such file"))
    entries = select(path, request_id=args.request_id, resource=args.resource, action=args.action, since=since)
    if data and args.json:
        for entry in entries:  # JSON lines, as the trail holds them: a script reads one at a time
            sys.stdout.write(json.dumps(entry, sort_keys=False) + "\n")
        return 0
    if data:
        print_data(entries, args)
        return 0
    table = Table(f"audit trail {path}", ("time", "request", "method", "action", "type", "resource", "old", "new"),
                  noun="line")
    for entry in entries:
        changes = entry.get("changes") or {}
        table.rows.append([*(entry.get(k) for k in ("time", "request_id", "method", "action", "resource_type",
                                                     "resource_id")),
                           short(changes.get("old")), short(changes.get("new"))])
    print_table(table, args)
    return 0
