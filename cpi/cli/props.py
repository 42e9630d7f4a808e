"""`cpi props`: a cloud's config and cloud_properties reference, generated from its models."""

from __future__ import annotations

import argparse
import sys

from . import options

EXAMPLES = """\
examples:
  cpi props                      # the local cloud
  cpi props aws > docs/aws.md    # regenerate a reference
  cpi props openstack | less"""


def add_parser(sub: options.Subparsers, name: str, summary: str) -> None:
    p = sub.add_parser(name, help=summary,
                       description="Print a cloud's cpi.json properties and cloud_properties reference,\n"
                       "generated from its models (the docs/<cloud>.md files).",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    from .usage import clouds

    p.add_argument("cloud", nargs="?", default="local", help=f"{clouds()} (default: local) or a plugin's name")
    p.set_defaults(func=props)


def props(args: argparse.Namespace) -> int:
    from cpi.clouds import available, load_cloud
    from cpi.errors import CpiError
    from cpi.operator.reference import markdown

    try:
        cloud = load_cloud(args.cloud)
    except CpiError as exc:
        names = available()
        reason = f"unknown cloud '{args.cloud}'" if args.cloud not in names else str(exc)
        print(f"cpi props: error: {reason}; available: {', '.join(names)}", file=sys.stderr)
        return 2
    sys.stdout.write(markdown(cloud))
    return 0
