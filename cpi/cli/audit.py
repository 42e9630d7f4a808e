"""`cpi audit`: read the audit trail (every IaaS mutation the CPI made), filtered by
cpi/operator/audit.py, as a table or JSON lines."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cpi.operator.audit import parse_since, select, trail_path

from .output import short


def add_parser(sub, name: str, summary: str) -> None:
    p = sub.add_parser(
        name, help=summary,
        description="Read the audit trail (rotated files included, oldest first) of the cloud cpi.json names.",
        epilog="examples: cpi audit --config cpi.json --request-id cpi-123456;  "
               "cpi audit --config cpi.json --resource vol-0abc --since 2h --json",
    )
    p.add_argument("--config", help="cpi.json (default: the local cloud with its defaults)")
    p.add_argument("--file", help="read this audit file instead of the one cpi.json names")
    p.add_argument("--request-id", help="only the lines of this request")
    p.add_argument("--resource", help="only the lines about this resource id")
    p.add_argument("--action", help="only this action (create, delete, attach, ...)")
    p.add_argument("--since", help="only lines since this time: ISO 8601 (2026-01-31T12:00Z) or an age (30m, 2h, 7d)")
    p.add_argument("--json", action="store_true", help="print the lines as JSON lines for scripts")
    p.set_defaults(func=audit_command)


def audit_command(args: argparse.Namespace) -> int:
    from cpi import errors

    try:
        path = Path(args.file).expanduser().resolve() if args.file else trail_path(args.config)
        since = parse_since(args.since) if args.since else None
    except (errors.BoshError, ValueError) as exc:
        print(f"cpi audit: {getattr(exc, 'message', None) or exc}", file=sys.stderr)
        return 2
    entries = select(path, request_id=args.request_id, resource=args.resource, action=args.action, since=since)
    if args.json:
        for entry in entries:
            sys.stdout.write(json.dumps(entry, sort_keys=False) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"audit trail {path} ({len(entries)} lines)", title_justify="left")
    for column in ("time", "request", "method", "action", "type", "resource", "old", "new"):
        table.add_column(column, overflow="fold", no_wrap=column in ("time",))
    for entry in entries:
        changes = entry.get("changes") or {}
        cells = [str(entry.get(k) or "") for k in ("time", "request_id", "method", "action", "resource_type",
                                                   "resource_id")]
        cells += [short(changes.get("old")), short(changes.get("new"))]
        table.add_row(*(Text(cell) for cell in cells))  # Text: a "[...]" in a value is not markup
    Console().print(table)
    return 0
