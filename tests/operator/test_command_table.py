"""`cpi`'s command table (cpi/cli/commands.py) is the one place a command is named: the
top-level help is arranged from it alone, and a command's module is imported only when that
command runs, so `cpi --help` imports no command and `cpi list` no other command."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from cpi.cli.commands import COMMANDS
from tests.support.runner import ROOT

#: Runs `cpi ARGS...` in this process and prints the command modules it imported.
_PROBE = (
    "import json, sys\n"
    "from cpi.cli import main\n"
    "from cpi.cli.commands import COMMANDS\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit:\n"
    "    pass\n"
    "sys.stdout = sys.__stdout__\n"
    "print(json.dumps(sorted(c.name for c in COMMANDS if c.module in sys.modules)))\n"
)


def imported(*args: str) -> list[str]:
    run = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, cwd=ROOT,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


def test_top_level_help_imports_no_command():
    assert imported("--help") == []
    assert imported() == []  # no command: the usage error, from the table alone


@pytest.mark.parametrize("name", ["list", "show", "avail", "lifecycle", "plan", "certify", "release"])
def test_a_command_imports_its_own_module_only(name):
    assert imported(name, "--help") == [name]


def test_every_row_names_a_module_that_adds_its_parser():
    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names))
    for command in COMMANDS:
        module = importlib.import_module(command.module)
        assert callable(getattr(module, "add_parser", None)), command.module
        assert command.help and command.group


def test_the_top_level_help_is_the_table_in_order(tmp_path):
    run = subprocess.run([sys.executable, "-m", "cpi.cli", "--help"], capture_output=True, text=True, cwd=ROOT,
                         env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"}, timeout=60)
    listed = [line.split()[0] for line in run.stdout.split("\noptions:")[0].splitlines() if line.startswith("  ")]
    assert listed == [c.name for c in COMMANDS]
    examples = [line[2:] for line in run.stdout.split("examples:\n", 1)[1].split("\n\n")[0].splitlines()]
    assert examples == [line for c in COMMANDS for line in c.examples]
