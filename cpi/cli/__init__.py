"""`cpi`: the human side of the CPI. BOSH never runs this; it runs bin/cpi.

One module per command, named as the command is; cpi/cli/commands.py is the ordered table
of them, which `cpi --help` reads, and imports only the module of the command that runs.
(So nothing here may use the builtin `list`: once `cpi list` runs, this package's `list` is
the module cpi.cli.list.)"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from .commands import run

    return run(argv)
