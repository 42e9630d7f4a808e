"""`cpi props`: a cloud's config and cloud_properties reference, generated from its models."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("props", help="print a cloud's config and cloud_properties reference (Markdown)")
    p.add_argument("cloud", nargs="?", default="local")
    p.set_defaults(func=props)


def props(args: argparse.Namespace) -> int:
    from cpi.clouds import load_cloud
    from cpi.reference import markdown

    sys.stdout.write(markdown(load_cloud(args.cloud)))
    return 0
