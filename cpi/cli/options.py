"""The options every `cpi` command spells the same way, as bosh spells its own: `--config`
(default `$CPI_CONFIG`, as bosh's `-e` defaults to `$BOSH_ENVIRONMENT`), `--json` and
`--yaml`, `--column`, `--tty`, `-n/--non-interactive` (default `$CPI_NON_INTERACTIVE`),
`--timeout` (how long a command that talks to a cloud waits on it: cpi.cli.timeout).

Each is accepted before the command (`cpi --json list vms`, on the top-level parser) and
after it (`cpi list vms --json`, on the command's parser, which a command adds with
`add(p, ...)` for the options it uses). The command's copy has no default of its own
(argparse.SUPPRESS), so a value given before the command is kept unless it is given again
after."""

from __future__ import annotations

import argparse
import os
from typing import TypeAlias

#: What a command's add_parser adds its own parser to: the top-level parser's sub-commands.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

#: The environment variable naming the cpi.json of every command (as BOSH_ENVIRONMENT).
CONFIG_ENV = "CPI_CONFIG"
#: Set to true/1/yes: every confirmation is affirmed (as BOSH_NON_INTERACTIVE).
NON_INTERACTIVE_ENV = "CPI_NON_INTERACTIVE"

CONFIG, OUTPUT, COLUMNS, INTERACTION, TIMEOUT = "config", "output", "columns", "interaction", "timeout"


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _adders(p: argparse.ArgumentParser, top: bool) -> dict[str, list[tuple[tuple[str, ...], dict]]]:
    def default(value: object) -> object:
        return value if top else argparse.SUPPRESS

    return {
        CONFIG: [(("--config",), {
            "metavar": "CPI_JSON", "default": default(os.environ.get(CONFIG_ENV) or None),
            "help": f"the cpi.json naming the cloud (default: ${CONFIG_ENV}, else the local cloud's defaults)"})],
        OUTPUT: [(("--json",), {"action": "store_true", "default": default(False),
                                    "help": "print the data as JSON for scripts"}),
                 (("--yaml",), {"action": "store_true", "default": default(False),
                                    "help": "print the data as YAML"}),
                 (("--tty",), {"action": "store_true", "default": default(False),
                                   "help": "print the title and column headers even when not a terminal"})],
        COLUMNS: [(("--column",), {"action": "append", "metavar": "NAME", "dest": "columns", "default": default(None),
                                       "help": "only this column of the table (repeat for more; in the order given)"})],
        INTERACTION: [(("-n", "--non-interactive"), {
            "action": "store_true", "default": default(_flag(os.environ.get(NON_INTERACTIVE_ENV))),
            "help": f"answer yes to every confirmation (default: ${NON_INTERACTIVE_ENV})"})],
        # a string, checked by the command (cpi.cli.timeout.seconds): a bad value is then one
        # line and exit 2, as every other usage error of a command
        TIMEOUT: [(("--timeout",), {
            "metavar": "SECONDS", "default": default(None),
            "help": "give up on a cloud request that is not answered (retries included) after this long "
                    "(default: 30; certify: the config's own budgets); connecting: at most 5"})],
    }


#: the heading a command's help lists the shared options under
COMMON = "common options (also accepted before the command)"


def add(p: argparse.ArgumentParser, *groups: str) -> None:
    """The shared options of `groups` (CONFIG, OUTPUT, COLUMNS, INTERACTION, TIMEOUT) on a command's
    parser, listed under "common options" in its help: one heading, however many calls add
    to it (`cpi orphans` adds the cloud's options, then -n)."""
    group = next((g for g in p._action_groups if g.title == COMMON), None) or p.add_argument_group(COMMON)
    adders = _adders(p, top=False)
    for name in groups:
        for flags, kwargs in adders[name]:
            group.add_argument(*flags, **kwargs)


def add_top(p: argparse.ArgumentParser) -> None:
    """Every shared option on the top-level parser, with its real default."""
    for adders in _adders(p, top=True).values():
        for flags, kwargs in adders:
            p.add_argument(*flags, **kwargs)
