"""`cpi --help`: a description, the commands in groups with their one-line helps, and
examples. Commands register themselves (`add_parser`); this only arranges what they give:
a command not named in GROUPS is listed under "other commands", never left out."""

from __future__ import annotations

import argparse
import shutil
import textwrap

DESCRIPTION = """\
The operator's side of the BOSH Python CPI. BOSH itself never runs this: a director or
`bosh create-env` runs bin/cpi, one process per CPI call. `cpi` calls that same bin/cpi
(or the cloud code behind it) to try, inspect and check the clouds it drives: local,
aws, openstack and any plugin."""

# (heading, commands in the order shown); later helpers add their command names here.
GROUPS: list[tuple[str, tuple[str, ...]]] = [
    ("try the CPI", ("lifecycle", "call")),
    ("see what the CPI manages", ("list", "show", "avail", "orphans", "audit")),
    ("check before a deploy", ("validate", "plan", "certify")),
    ("reference and release", ("props", "release")),
]

# (command, example line): the epilog shows those of the commands registered, in this order.
EXAMPLES: list[tuple[str, str]] = [
    ("lifecycle", "cpi lifecycle                                  # a whole lifecycle on the local cloud"),
    ("call", "cpi call info                                  # one CPI method, as a director calls it"),
    ("call", "cpi call --config cpi.json has_vm '\"vm-1234\"'  # relative paths are the current directory's"),
    ("list", "cpi list vms --config cpi.json                 # what the CPI made, with its BOSH tags"),
    ("orphans", "cpi orphans --config cpi.json --director-uuid UUID --known known.json"),
    ("audit", "cpi audit --config cpi.json --since 2h         # every IaaS change, old and new"),
    ("validate", "cpi validate cloud-config.yml --config cpi.json --online"),
    ("plan", "cpi plan create_disk 10240 '{\"type\": \"gp3\"}' --config cpi.json  # changes nothing"),
    ("certify", "cpi certify --config cpi.json --stemcell IMAGE --stemcell-properties '{...}'"),
    ("props", "cpi props aws                                  # every aws property and cloud_property"),
    ("release", "cpi release build                              # the BOSH release, from any directory"),
]
MORE = "`cpi COMMAND --help` shows a command's options and examples."


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's and epilog's line breaks (they hold lists and examples)."""


def make_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog="cpi", description=DESCRIPTION, formatter_class=Formatter)


def add_subparsers(parser: argparse.ArgumentParser):
    return parser.add_subparsers(dest="command", required=True, metavar="COMMAND")


def finish(parser: argparse.ArgumentParser, sub) -> None:
    """Move the registered commands into the description, grouped, each with its one-line
    help; the flat "positional arguments" list is hidden."""
    helps = {action.dest: (action.help or "") for action in sub._choices_actions}
    names = list(helps)
    width = max((len(name) for name in names), default=0) + 2
    shown: set[str] = set()
    sections = []
    for heading, members in GROUPS + [("other commands", tuple(names))]:
        rows = [name for name in members if name in helps and name not in shown]
        if not rows:
            continue
        shown.update(rows)
        lines = [_row(name, width, helps[name]) for name in rows]
        sections.append(f"{heading}:\n" + "\n".join(lines))
    parser.description = DESCRIPTION + "\n\n" + "\n\n".join(sections)
    examples = [f"  {line}" for command, line in EXAMPLES if command in helps]
    parser.epilog = "examples:\n" + "\n".join(examples) + "\n\n" + MORE
    sub.help = argparse.SUPPRESS
    parser.usage = "%(prog)s [-h] COMMAND [ARGS ...]"


def _row(name: str, width: int, text: str) -> str:
    """`  name   help`, the help wrapped to the terminal under its own column."""
    columns = max(shutil.get_terminal_size().columns - 2, 60)
    indent = " " * (2 + width)
    return textwrap.fill(" ".join(text.split()), columns, initial_indent=f"  {name:<{width}}",
                         subsequent_indent=indent)
