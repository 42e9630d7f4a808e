"""`cpi call`: one CPI method through bin/cpi, the response printed as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from . import options, timeout
from .client import Client
from .output import error_line, print_data
from .request import add_call_parser, read_request

EXAMPLES = """\
examples:
  cpi call info
  cpi call --config cpi.json has_vm '"vm-1234"'
  cpi call --config cpi.json create_disk 1024 '{}' null
  cpi call --api-version 1 --config ./cpi.json info
  cpi call create_stemcell '"image.tgz"' '{"name": "s", "version": "1"}'

Each argument is one JSON value (quote it for the shell). A relative --config is read from
the current directory, as is create_stemcell's image path. The response is printed as JSON
(--yaml: as YAML); with an error, one line on stderr also says it, and how long the call
took. --timeout (default 30) bounds each request to the cloud, retries included: a cloud
that does not answer ends the call after about that long. On a terminal, a spinner says
what bin/cpi is doing meanwhile. Exit status: 0 when the response has no error, 1 when it
has one, 2 for a usage error."""


def add_parser(sub: options.Subparsers, name: str, summary: str) -> None:
    add_call_parser(sub, name, summary,
                    "Call one CPI method as a director does: one bin/cpi process, the environment\n"
                    "wiped to PATH, one JSON request on its stdin. Prints the response.",
                    EXAMPLES, "info, create_vm, has_disk", call)


def call(args: argparse.Namespace) -> int:
    request = read_request("call", args)
    if request is None:
        return 2
    seconds, arguments, config = request.seconds, request.arguments, request.config
    client = Client(config, args.api_version, echo=False, director_uuid=args.director_uuid or "cpi-cli",
                    context=timeout.overrides_of_file(config, seconds), spinner=True)
    response = client.raw(args.method, *arguments)
    if args.yaml:
        print_data(response, args)
    else:
        print(json.dumps(response, indent=2))
    error = response["error"]
    if error is None:
        return 0
    assert client.status is not None  # set by every call
    sys.stdout.flush()  # the response first, then the line that sums it up
    message = f"{error['type']}: {error['message']}"
    print(error_line("call", client.status.failed(message, seconds)), file=sys.stderr)
    return 1
