"""`cpi audit`: read the audit trail (every IaaS mutation the CPI made), filtered."""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from .output import short

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def add_parser(sub, name: str, help: str) -> None:
    p = sub.add_parser(
        name, help=help,
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


def parse_since(text: str, now: datetime | None = None) -> datetime:
    now = now or datetime.now(timezone.utc)
    match = _DURATION.fullmatch(text.strip().lower())
    if match:
        return now - timedelta(seconds=float(match.group(1)) * _SECONDS[match.group(2)])
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"--since: '{text}' is neither an ISO 8601 time nor an age such as 30m, 2h or 7d") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _time(entry: dict[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(entry.get("time", "")).replace("Z", "+00:00"))
    except ValueError:
        return None


def trail_path(config_path: str | None) -> Path:
    from cpi import audit, config

    raw = config.read_file(str(Path(config_path).expanduser().resolve()) if config_path else None)
    return audit.default_path(config.build(raw))


def audit_command(args: argparse.Namespace) -> int:
    from cpi import audit, errors

    try:
        path = Path(args.file).expanduser().resolve() if args.file else trail_path(args.config)
        since = parse_since(args.since) if args.since else None
    except (errors.BoshError, ValueError) as exc:
        print(f"cpi audit: {getattr(exc, 'message', None) or exc}", file=sys.stderr)
        return 2
    entries = []
    for entry in audit.read(path):
        if args.request_id and entry.get("request_id") != args.request_id:
            continue
        if args.resource and entry.get("resource_id") != args.resource:
            continue
        if args.action and entry.get("action") != args.action:
            continue
        if since is not None:
            when = _time(entry)
            if when is None or when < since:
                continue
        entries.append(entry)
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
