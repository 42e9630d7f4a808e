"""`cpi`: the human side of the CPI. BOSH never runs this; it runs bin/cpi.

One module per command; each adds its own subparser (`add_parser`)."""

from __future__ import annotations

import argparse
import sys

from . import call, demo, props, see, usage
from . import validate
from . import audit
from . import orphans
from . import certify
from . import plan


def main(argv: list[str] | None = None) -> int:
    parser = usage.make_parser()
    sub = usage.add_subparsers(parser)
    for command in (demo, call, props, see):
        command.add_parser(sub)
    validate.add_parser(sub)
    audit.add_parser(sub)
    orphans.add_parser(sub)
    certify.add_parser(sub)
    plan.add_parser(sub)
    try:
        from cpi.release.cli import add_parser as add_release_parser
    except ImportError:
        add_release_parser = None
    if add_release_parser:
        add_release_parser(sub)
    usage.finish(parser, sub)
    args = parser.parse_args(argv)
    return args.func(args)
