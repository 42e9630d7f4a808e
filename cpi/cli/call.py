"""`cpi call`: one CPI method through bin/cpi, the response printed as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .client import Client

EXAMPLES = """\
examples:
  cpi call info
  cpi call --config cpi.json has_vm '"vm-1234"'
  cpi call --config cpi.json create_disk 1024 '{}' null
  cpi call --api-version 1 --config ./cpi.json info
  cpi call create_stemcell '"image.tgz"' '{"name": "s", "version": "1"}'

Each argument is one JSON value (quote it for the shell). A relative --config is read from
the current directory, as is create_stemcell's image path. Exit status: 0 when the response has no error, 1 when it has one,
2 for a usage error."""


def add_parser(sub) -> None:
    p = sub.add_parser("call", help="call one CPI method through bin/cpi and print the response",
                       description="Call one CPI method as a director does: one bin/cpi process, the environment\n"
                       "wiped to PATH, one JSON request on its stdin. Prints the response.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_call_arguments(p, "info, create_vm, has_disk")
    p.set_defaults(func=call)


def add_call_arguments(p: argparse.ArgumentParser, examples: str) -> None:
    """A CPI call's method, its JSON arguments, --config and --api-version (call, plan)."""
    p.add_argument("method", help=f"a CPI method name, e.g. {examples}")
    p.add_argument("arguments", nargs="*", help="each argument as JSON, e.g. '\"vm-1\"' or '{}'")
    p.add_argument("--config", metavar="CPI_JSON", help="cpi.json (default: the local cloud with its defaults)")
    p.add_argument("--api-version", type=int, default=2, metavar="N", help="the request's api_version (default: 2)")


def json_arguments(command: str, method: str, texts: list[str]) -> list | None:
    """Each argument parsed as JSON (None after printing the usage error); create_stemcell's
    relative image path made the caller's (bin/cpi runs from "/")."""
    arguments = []
    for text in texts:
        try:
            arguments.append(json.loads(text))
        except json.JSONDecodeError as exc:
            print(f"cpi {command}: error: argument {text!r} is not JSON ({exc.msg}); quote strings: '\"vm-1\"'",
                  file=sys.stderr)
            return None
    if method == "create_stemcell" and arguments and isinstance(arguments[0], str) and arguments[0] \
            and not arguments[0].startswith("/"):
        arguments[0] = str(Path(arguments[0]).absolute())
    return arguments


def config_file(command: str, given: str | None) -> Path | None:
    """--config made absolute (None: the local cloud's defaults); raises SystemExit(2) when
    there is no such file."""
    config = Path(given).absolute() if given else None
    if config is not None and not config.is_file():
        print(f"cpi {command}: error: --config {given}: no such file", file=sys.stderr)
        raise SystemExit(2)
    return config


def call(args: argparse.Namespace) -> int:
    arguments = json_arguments("call", args.method, args.arguments)
    if arguments is None:
        return 2
    config = config_file("call", args.config)
    response = Client(config, args.api_version, echo=False).raw(args.method, *arguments)
    print(json.dumps(response, indent=2))
    return 0 if response["error"] is None else 1
