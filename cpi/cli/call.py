"""`cpi call`: one CPI method through bin/cpi, the response printed as JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .client import Client


def add_parser(sub) -> None:
    p = sub.add_parser("call", help="call one CPI method through bin/cpi and print the response")
    p.add_argument("method")
    p.add_argument("arguments", nargs="*", help="each argument as JSON, e.g. '\"vm-1\"' or '{}'")
    p.add_argument("--config", help="cpi.json (default: the local cloud with its defaults)")
    p.add_argument("--api-version", type=int, default=2)
    p.set_defaults(func=call)


def call(args: argparse.Namespace) -> int:
    arguments = [json.loads(a) for a in args.arguments]
    response = Client(Path(args.config) if args.config else None, args.api_version, echo=False).raw(args.method, *arguments)
    print(json.dumps(response, indent=2))
    return 0 if response["error"] is None else 1
