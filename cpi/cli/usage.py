"""`cpi --help`: a description, the commands in groups with their one-line helps, and
examples, all arranged from the command table (cpi/cli/commands.py), so that the help
needs no command's module and cannot list a command the table does not have."""

from __future__ import annotations

import argparse
import shutil
import textwrap

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

DESCRIPTION = """\
The operator's side of the BOSH Python CPI. BOSH itself never runs this: a director or
`bosh create-env` runs bin/cpi, one process per CPI call. `cpi` calls that same bin/cpi
(or the cloud code behind it) to try, inspect and check the clouds it drives: {clouds}
and any plugin."""


def clouds() -> str:
    """The built-in clouds, named from the registry (a cloud added there is listed here):
    "local, aws, openstack, vsphere"."""
    from cpi.clouds import BUILTIN

    return ", ".join(BUILTIN)

MORE = "`cpi COMMAND --help` shows a command's options and examples."


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's and epilog's line breaks (they hold lists and examples)."""


class Command:
    """One row of the table."""

    __slots__ = ("examples", "group", "help", "module", "name", "optional")

    def __init__(self, name: str, module: str, group: str, summary: str, examples: Sequence[str] = (),
                 optional: bool = False):
        self.name, self.module, self.group, self.help = name, module, group, summary
        self.examples = tuple(examples)
        self.optional = optional  # listed only when its module is in this build


def make_parser(commands: Sequence[Command]) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """The top-level parser and its subparsers action (to which each command is added):
    the commands are listed in the description, grouped under their headings in the
    table's order, each with its one-line help; the flat "positional arguments" list is
    hidden; the epilog shows the commands' examples in the same order."""
    description = textwrap.fill(" ".join(DESCRIPTION.format(clouds=clouds()).split()), 88)
    parser = argparse.ArgumentParser(prog="cpi", description=description, formatter_class=Formatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help=argparse.SUPPRESS)
    parser.usage = "%(prog)s [-h] COMMAND [ARGS ...]"  # after the subparsers: theirs start with "cpi", not this
    width = max((len(c.name) for c in commands), default=0) + 2
    groups: dict[str, list[str]] = {}
    for command in commands:
        groups.setdefault(command.group, []).append(_row(command.name, width, command.help))
    sections = [f"{heading}:\n" + "\n".join(rows) for heading, rows in groups.items()]
    parser.description = description + "\n\n" + "\n\n".join(sections)
    examples = [f"  {line}" for command in commands for line in command.examples]
    parser.epilog = "examples:\n" + "\n".join(examples) + "\n\n" + MORE
    return parser, sub


def _row(name: str, width: int, text: str) -> str:
    """`  name   help`, the help wrapped to the terminal under its own column."""
    columns = max(shutil.get_terminal_size().columns - 2, 60)
    indent = " " * (2 + width)
    return textwrap.fill(" ".join(text.split()), columns, initial_indent=f"  {name:<{width}}",
                         subsequent_indent=indent)
