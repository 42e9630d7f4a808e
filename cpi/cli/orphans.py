"""`cpi orphans`: what a director's CPI made that the director no longer knows (found by
cpi/operator/orphans.py), listed, and deleted (after confirmation) through bin/cpi, the
same calls a director would make (so every deletion lands in the audit trail)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cpi.clouds.inventory import Resource
from cpi.inputs import KNOWN_LIMIT, InputError, read_bytes
from cpi.operator import known
from cpi.operator.orphans import DELETERS, survey

from . import options, timeout
from .client import Client
from .cloud import Opened, add_cloud_options
from .output import CliError, confirm, escaped, print_data, reading, wants_data
from .reads import open_to_read
from .table import Table, plural, print_table

DESCRIPTION = """Resources tagged with the director's UUID whose cid the director does not know, and that the cloud
shows nothing alive holding (a disk attached to a VM, the snapshots of a disk that stays and the
stemcell of a VM that stays are never offered)."""
EPILOG = ("the complete known set: " + "; ".join(f"{command} >> known.json" for _, command, _ in known.RECIPE)
          + """; then cpi orphans --director-uuid $(bosh env --json | jq -r '.Tables[0].Rows[0].uuid') --known
known.json --config cpi.json. A list of these the input lacks is named on stderr, with what that lets
through. An input that is empty, names no cid, is bosh's error document, truncated, or of another
shape is refused (exit 1): nothing is offered for deletion.""")


def add_parser(sub: options.Subparsers, name: str, summary: str) -> None:
    p = sub.add_parser(name, help=summary, description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("--director-uuid", required=True, help="whose resources to look at")
    p.add_argument("--known", required=True, metavar="FILE",
                   help="what the director knows: bosh instances --details / disks --orphaned / orphaned-vms / "
                        "stemcells --json output, a JSON list of cids, or one cid per line; - for stdin")
    p.add_argument("--delete", action="store_true", help="delete the orphans (asks first: Continue? [yN]; -n: yes)")
    add_cloud_options(p)
    options.add(p, options.INTERACTION)
    p.set_defaults(func=orphans_command)


def orphans_command(args: argparse.Namespace) -> int:
    data = wants_data(args)
    seconds = timeout.seconds(args)
    try:
        text = read_bytes(args.known, f"--known {args.known}", KNOWN_LIMIT).decode()
        told = known.read(text)
    except InputError as exc:
        raise CliError(f"--known {args.known}: {exc.reason}; nothing listed or deleted") from None
    except (UnicodeDecodeError, known.KnownError) as exc:
        raise CliError(f"--known {args.known}: {exc}; nothing listed or deleted") from None
    opened = open_to_read(args.config, seconds)
    with reading("what the director may have left", seconds, opened.text):
        seen = survey(opened.cloud, args.director_uuid, told.cids)
    found = seen.offered
    notes = [f"warning: {line}" for line in told.missing()]
    if seen.untied:
        notes.append(f"note: {plural(len(seen.untied), 'resource')} a director tagged but no director_uuid ties to "
                     "this one (made by the official CPI before the switch, or by another director): never offered; "
                     "`cpi list` shows them")
    if data:
        print_data(opened.clean([r.wire() for r in found]), args)
    else:
        _table(opened, found, len(told.cids), args)
    stdin_taken = args.known == "-"
    # told before a deletion is asked for or done; a refusal (no terminal to ask on, no -n)
    # stays the one line every error is, and the notes come with the run that may delete
    asks = sys.stdin.isatty() and not stdin_taken
    if not (args.delete and found) or getattr(args, "non_interactive", False) or asks:
        for line in notes:
            print(escaped(line), file=sys.stderr)
    if not args.delete or not found:
        return 0
    confirm(args, f"delete {plural(len(found), 'resource')}", stdin_taken=stdin_taken)
    client = Client(Path(args.config).resolve() if args.config else None, echo=False, context=opened.overrides,
                    spinner=True)
    failed = 0
    for resource in found:
        response = client.raw(DELETERS[resource.kind + "s"], resource.cid)
        if response["error"]:
            failed += 1
            print(escaped(f"{resource.kind} {resource.cid}: {response['error']['type']}: "
                          f"{response['error']['message']}"), file=sys.stderr)
        else:
            print(escaped(f"deleted {resource.kind} {resource.cid}"), file=sys.stderr)
    return 1 if failed else 0


def _table(opened: Opened, found: list[Resource], known_count: int, args: argparse.Namespace) -> None:
    title = (f"orphans on the {opened.plugin} cloud (the director knows "
             f"{plural(known_count, 'cid')})")
    table = Table(title, ("kind", "cid", "state", "created_at", "age", "agent_id", "deployment", "job"),
                  noun="orphan")
    for resource in found:
        tags = opened.clean(resource.tags)
        table.rows.append([resource.kind, resource.cid, resource.state, resource.created_at, resource.age(),
                           *(tags.get(c, "") for c in ("agent_id", "deployment", "job"))])
    print_table(table, args)
