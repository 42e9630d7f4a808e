"""A CPI request as the operator types it: a method, each argument one JSON value,
--config and --api-version, with relative paths made the caller's (bin/cpi runs from "/").
What `cpi call` sends through bin/cpi and `cpi plan` runs in its own process."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cpi import strict_json

from . import options, timeout


def add_call_parser(sub: options.Subparsers, name: str, summary: str, description: str, epilog: str,
                    methods: str, command: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
    """The parser of a command that takes a CPI call (call, plan): the call's method, its
    JSON arguments, --config, --json/--yaml, --timeout, --api-version and --director-uuid;
    its description and examples printed as written (they are laid out by hand); `command`
    runs it."""
    p = sub.add_parser(name, help=summary, description=description, epilog=epilog,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("method", help=f"a CPI method name, e.g. {methods}")
    p.add_argument("arguments", nargs="*", help="each argument as JSON, e.g. '\"vm-1\"' or '{}'")
    options.add(p, options.CONFIG, options.OUTPUT, options.TIMEOUT)
    p.add_argument("--api-version", type=int, default=2, metavar="N", help="the request's api_version (default: 2)")
    p.add_argument("--director-uuid", help="the director_uuid the call's context carries (the tags it writes)")
    p.set_defaults(func=command)
    return p


def json_arguments(command: str, method: str, texts: list[str]) -> list | None:
    """Each argument parsed as JSON (None after printing the usage error); create_stemcell's
    relative image path made the caller's (bin/cpi runs from "/")."""
    arguments = []
    for text in texts:
        try:
            arguments.append(strict_json.loads(text, "argument"))
        except strict_json.InvalidJSON as exc:  # as bin/cpi reads a request: bounded nesting, no NaN
            cut = f"{text[:80]!r}{'...' if len(text) > 80 else ''}"  # one line, whatever was typed
            print(f"cpi {command}: error: argument {cut} is not JSON ({exc.reason}); quote strings: '\"vm-1\"'",
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
    if config is not None and not config.is_file():  # bin/cpi would refuse it (cpi.inputs), less plainly
        print(f"cpi {command}: error: --config {given}: "
              + ("not a regular file" if config.exists() else "no such file"), file=sys.stderr)
        raise SystemExit(2)
    return config


@dataclass(frozen=True)
class Request:
    """What `cpi call` and `cpi plan` read off their command line before they run the
    method: its --timeout, its arguments parsed, the --config to open."""

    seconds: float | None
    arguments: list
    config: Path | None


def read_request(command: str, args: argparse.Namespace) -> Request | None:
    """The request, in the order its checks fail (a bad --timeout first, then an argument
    that is not JSON, then a missing --config); None after printing the usage error of an
    argument that is not JSON (the command's exit status 2)."""
    seconds = timeout.seconds(args)
    arguments = json_arguments(command, args.method, args.arguments)
    if arguments is None:
        return None
    return Request(seconds, arguments, config_file(command, args.config))
