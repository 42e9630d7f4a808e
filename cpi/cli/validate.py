"""`cpi validate`: check cpi.json and a cloud-config against the selected cloud before a
deploy, and say what a call would do with each: a key no model knows is what the call
ignores with a warning (or refuses, under validation.strict), found by the same code."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from cpi.inputs import InputError

from . import options, timeout
from .cloud import missing_state, read_config
from .output import CliError, error_line, print_data, waiting, wants_data
from .table import Table, plural, print_table

if TYPE_CHECKING:
    from cpi.clouds.findings import Finding
    from cpi.logs import Redactor


DESCRIPTION = """Check cpi.json, and every azs, vm_types, vm_extensions, disk_types and networks entry of a BOSH
cloud-config, against the selected cloud's models, reporting every problem with its path: each key
the CPI does not know (which a call would ignore, with a warning, or refuse under
validation.strict), with the key it likely means. Exit status 1 when anything is wrong, 0 when it is
clean, 2 when it could not check. --online: --timeout (default 30) bounds each request to the cloud,
retries included."""
EPILOG = """examples: cpi validate --config cpi.json;  cpi validate cloud-config.yml --online;  bosh
cloud-config | cpi validate -"""


def add_parser(sub: options.Subparsers, name: str, summary: str) -> None:
    p = sub.add_parser(name, help=summary, description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("cloud_config", metavar="CLOUD_CONFIG.yml", nargs="?",
                   help="the cloud-config (YAML), e.g. from `bosh cloud-config`; - reads it from stdin; "
                   "without it, cpi.json alone is checked")
    p.add_argument("--online", action="store_true",
                   help="also ask the cloud (read-only) that the subnets, security groups, key pairs, "
                   "instance types/flavors, AZs and volume types named exist")
    options.add(p, options.CONFIG, options.OUTPUT, options.COLUMNS, options.TIMEOUT)
    p.set_defaults(func=validate)


def _fail(message: str) -> int:
    print(error_line("validate", message), file=sys.stderr)
    return 2


def validate(args: argparse.Namespace) -> int:
    from cpi.operator import cloud_config

    seconds = timeout.seconds(args)
    doc = None
    if args.cloud_config is not None:
        try:
            doc = cloud_config.load_yaml(args.cloud_config)
        except InputError as exc:
            return _fail(str(exc))
        except cloud_config.YamlError as exc:
            return _fail(f"not valid YAML: {exc}")
    ready, findings, redactor = _open(args, seconds)
    if ready is not None and (doc is not None or args.online):
        try:
            findings += _cloud_config_findings(args, ready, doc, seconds, redactor)
        except CliError as exc:
            return _fail(exc.message)
    for finding in findings:
        finding.path = redactor.text(finding.path)
        finding.problem = redactor.text(finding.problem)

    errors = [f for f in findings if f.severity == "error"]
    plugin = ready.config.plugin if ready is not None else None
    if wants_data(args):
        print_data({"cloud": plugin, "online": args.online, "ok": not errors,
                    "findings": [f.to_dict() for f in findings]}, args, rows="findings")
    else:
        _print_table(args, _checked(args, plugin), findings)
    return 1 if errors else 0


def _open(args: argparse.Namespace, seconds: float | None) -> tuple[Any, list, Any]:
    """cpi.json opened as a call opens it, its findings (each key the call ignores and each
    secret too short to mask by value, or, with None, the error every call would fail with,
    cpi.json being what is wrong) and the Redactor that masks its secrets in whatever is
    printed."""
    from cpi import opening
    from cpi.clouds.findings import Finding
    from cpi.errors import BoshError
    from cpi.logs import Redactor, redactor_for
    from cpi.operator import cloud_config

    redactor = Redactor()
    try:
        raw = read_config(args.config)
        redactor = redactor_for(raw)
        limits = timeout.overrides(raw, seconds) if args.online else {}
        with _quiet_warnings():  # what the call would log is reported as findings
            ready = opening.open_cloud(raw, {"request_id": "cpi-validate", **limits})  # the cloud: only for --online
    except BoshError as exc:
        findings = [Finding("cpi.json", f"{exc.message} (the calls fail with this error)")]
        if args.cloud_config is not None:
            findings.append(Finding("(cloud-config)", "not checked: cpi.json names no cloud it can open", "info"))
        return None, findings + _too_short(redactor), redactor
    found = cloud_config.config_findings(ready.config.ignored, ready.config.validation.strict)
    return ready, found + _too_short(redactor), redactor


def _too_short(redactor: Any) -> list:
    """A warning for each secret too short to be masked by value (cpi.logs.maskable), by its
    key and never its value: it stays masked under its key, but a message that quotes it
    in running text (an IaaS's error) would show it."""
    from cpi.clouds.findings import Finding
    from cpi.logs import MASKED_LENGTH

    return [Finding("cpi.json", f"{key}: secret too short to mask in running text (use {MASKED_LENGTH} or more "
                    "characters, not only letters)", "warning") for key in redactor.too_short]


def _cloud_config_findings(args: argparse.Namespace, ready: Any, doc: Any, seconds: float | None,
                           redactor: Redactor) -> list:
    """The cloud-config's findings (none without one), and with --online what the cloud says
    of what it names."""
    from cpi.clouds.findings import Finding
    from cpi.operator import cloud_config

    config = ready.config
    findings, items = cloud_config.check(doc, config.cloud_class, config.validation.strict) if doc is not None \
        else ([], [])
    missing = missing_state(ready.config) if args.online else None
    if missing:  # nothing made there yet: nothing to look up, and nothing is created to look
        findings.append(Finding("(online)", f"{missing}: nothing checked online", "info"))
    elif args.online:
        with waiting("asking the cloud", seconds, redactor.text):
            findings += cloud_config.check_online(ready.cloud, items)
    return findings


@contextlib.contextmanager
def _quiet_warnings() -> Iterator[None]:
    """The config's warnings (cpi.validation's: a key ignored) not printed while it is
    opened: each is one of the findings, said once, in the command's own output."""
    import logging

    logger = logging.getLogger("cpi.validation")
    was = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was


def _checked(args: argparse.Namespace, plugin: str | None) -> str:
    """What was checked, as the verdict names it: the config file and the cloud-config,
    against which cloud."""
    names = [args.config or "the default cpi.json"]
    if args.cloud_config is not None:
        names.append("the cloud-config on stdin" if args.cloud_config == "-" else args.cloud_config)
    against = f" against the {plugin} cloud" if plugin else ""
    return " and ".join(names) + against + (" (online)" if args.online else "")


def _print_table(args: argparse.Namespace, what: str, findings: list[Finding]) -> None:
    """The findings, one per row (severity, path, problem), then the verdict."""
    table = Table(what, ("severity", "path", "problem"), noun="finding")
    table.rows += [[f.severity, f.path, f.problem] for f in findings]
    if findings:
        print_table(table, args)
    errors = sum(1 for f in findings if f.severity == "error")
    verdict = (f"{what}: {plural(errors, 'error')}" if errors else
               f"ok: {what}: " + ("no problems found" if not findings else "no errors"))
    print(verdict)
