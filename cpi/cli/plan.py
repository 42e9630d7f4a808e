"""`cpi plan`: what a CPI call would change, without changing anything (Salt's test=True):
the plan made by cpi/operator/plan.py, printed Salt-state style or as JSON."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from cpi.operator.plan import make_plan

from . import options, timeout
from .output import Status, escaped, print_data, wants_data, watching
from .request import add_call_parser, read_request

EXAMPLES = """\
examples:
  cpi plan create_disk 10240 '{"type": "gp3"}' '"i-0abc123"' --config cpi.json
  cpi plan create_vm '"agent-1"' '"ami-0abc"' '{"instance_type": "m5.large"}' \\
      '{"default": {"type": "manual", "ip": "10.0.0.5", "cloud_properties": {"subnet": "subnet-1"}}}' \\
      '[]' '{}' --config cpi.json --director-uuid UUID
  cpi plan delete_vm '"vm-1234"' --json

Arguments are the method's, each one JSON value, as with `cpi call`. What is printed:
every mutation with its changes (old -> new, as the audit trail would record them) and
whether the cloud allows it (AWS: EC2's dry run), every wait, what the call would return
or fail with; on stderr, each warning the call logs (a key of cpi.json or of the
cloud_properties it would ignore), also under "warnings" in --json. A plan stops early,
and says where, when the next step would read a resource only the real call would make.
--timeout (default 30) bounds each request to the cloud, retries included. Exit status: 0
when nothing would fail or be denied, 1 otherwise, 2 for a usage error."""


def add_parser(sub: options.Subparsers, name: str, summary: str) -> None:
    p = add_call_parser(sub, name, summary,
                        "Run one CPI method with every read done and every write withheld, and print\n"
                        "what it would change. BOSH never runs this mode; only this command does.",
                        EXAMPLES, "create_vm, attach_disk, delete_disk", plan_command)
    p.add_argument("-v", "--verbose", action="store_true", help="print the call's log on stderr")


def plan_command(args: argparse.Namespace) -> int:
    request = read_request("plan", args)
    if request is None:
        return 2
    seconds, arguments, config = request.seconds, request.arguments, request.config
    from cpi import plan

    try:
        # -v prints the call's log on stderr: no spinner over it. A cloud that does not
        # answer is the plan's `would_fail`, printed with the rest.
        shown = Status(f"planning {args.method}", _masker(config))
        with watching(shown) if not args.verbose else contextlib.nullcontext(shown):
            document = make_plan(args.method, arguments, str(config) if config else None,
                                 director_uuid=args.director_uuid, api_version=args.api_version,
                                 log_stream=sys.stderr if args.verbose else None,
                                 context=timeout.overrides_of_file(config, seconds))
    except plan.Refused as exc:
        print(escaped(f"cpi plan: {exc.message}"), file=sys.stderr)
        return 1
    if not args.verbose:  # -v printed them already, in the call's whole log
        for warning in document["warnings"]:
            print(escaped(f"cpi plan: warning: {warning}"), file=sys.stderr)
    if wants_data(args):
        print_data(document, args)
    else:
        show(document)
    return 1 if document["would_fail"] or document["denied"] else 0


def _masker(config: Any) -> Any:
    """What masks the config's secrets in the spinner's lines (a retry's error text)."""
    from cpi.errors import BoshError
    from cpi.logs import redactor_for

    from .cloud import read_config

    try:
        return redactor_for(read_config(str(config) if config else None)).text
    except BoshError:  # the plan itself says what is wrong with the config
        return None


def show(document: dict[str, Any]) -> None:
    """Salt-state style: each change with its properties old -> new, then the outcome."""
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False)

    def say(line: str, style: str = "") -> None:
        """One line of the plan, the cloud's text in it `escaped` (a tag, a server's message)."""
        console.print(Text(escaped(line), style=style))

    count = document["mutations"]
    say(f"plan of {document['method']}: {count} change{'' if count == 1 else 's'} (nothing was changed)",
        style="bold")
    for number, step in enumerate(document["steps"], 1):
        if step["step"] == "mutation":
            head = f"{number}. {step.get('action')} {step.get('resource_type')} {step.get('resource_id')}"
            if step.get("permission"):
                head += f"  [{step['permission']}]"
            style = "red" if str(step.get("permission", "")).startswith("denied") else ""
            say(head, style=style)
            for key, old, new in _changed(step.get("changes") or {}):
                arrow = f"{_cell(old)} -> {_cell(new)}" if old is not None else _cell(new)
                say(f"     {key}: {arrow}")
        elif step["step"] == "wait":
            limit = f" (at most {step['timeout']:.0f}s)" if step.get("timeout") else ""
            say(f"{number}. wait until {step['what']}{limit}")
        else:
            say(f"{number}. stop: {step['reason']}", style="yellow")
    if document["would_fail"]:
        failure = document["would_fail"]
        say(f"would fail: {failure['type']}: {failure['message']}", style="red")
    elif not document["complete"]:
        say("planned up to the stop above; the rest depends on what the cloud answers", style="yellow")
    else:
        say(f"would return: {json.dumps(document['would_return'])}")
    if document["denied"]:
        refused = f"{document['denied']} change(s) would be refused: see the [denied: ...] above"
        say(refused, style="red")


def _cell(value: Any) -> str:
    from .output import short

    return value if isinstance(value, str) and len(value) <= 120 else short(value)


def _changed(changes: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, old, new) for each key either side names with a value."""
    old, new = changes.get("old"), changes.get("new")
    if isinstance(old, dict) or isinstance(new, dict):
        old, new = old or {}, new or {}
    if not isinstance(old, dict) or not isinstance(new, dict):
        if old is None and new is None:
            return []
        return [("value", old, new)]
    rows = []
    for key in list(new) + [k for k in old if k not in new]:
        if old.get(key) is not None or new.get(key) is not None:
            rows.append((key, old.get(key), new.get(key)))
    return rows
