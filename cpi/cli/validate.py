"""`cpi validate`: check a cloud-config against the selected cloud before a deploy."""

from __future__ import annotations

import argparse
import sys

from . import options, timeout
from .output import CliError, print_data, waiting, wants_data
from .table import Table, plural, print_table


def add_parser(sub, name: str, summary: str) -> None:
    p = sub.add_parser(
        name,
        help=summary,
        description="Check every azs, vm_types, vm_extensions, disk_types and networks entry of a BOSH "
        "cloud-config against the selected cloud's cloud_properties models, reporting every problem "
        "with its YAML path. Exit status 1 when anything is wrong, 0 when it is clean. --online: --timeout "
        "(default 30) bounds each request to the cloud, retries included.",
    )
    p.add_argument("cloud_config", metavar="CLOUD_CONFIG.yml",
                   help="the cloud-config (YAML), e.g. from `bosh cloud-config`")
    p.add_argument("--online", action="store_true",
                   help="also ask the cloud (read-only) that the subnets, security groups, key pairs, "
                   "instance types/flavors, AZs and volume types named exist")
    options.add(p, options.CONFIG, options.OUTPUT, options.COLUMNS, options.TIMEOUT)
    p.set_defaults(func=validate)


def _fail(message: str) -> int:
    print(f"cpi validate: error: {message}", file=sys.stderr)
    return 2


def validate(args: argparse.Namespace) -> int:
    from cpi import opening
    from cpi.clouds.findings import Finding
    from cpi.errors import BoshError
    from cpi.logs import Redactor
    from cpi.operator import cloud_config

    from .cloud import missing_state, read_config

    seconds = timeout.seconds(args)
    try:
        raw = read_config(args.config)
        limits = timeout.overrides(raw, seconds) if args.online else {}
        ready = opening.open_cloud(raw, {"request_id": "cpi-validate", **limits})  # the cloud: only for --online
    except BoshError as exc:
        return _fail(exc.message)
    cfg = ready.config
    try:
        doc = cloud_config.load_yaml(args.cloud_config)
    except OSError as exc:
        return _fail(f"cannot read {args.cloud_config}: {exc.strerror}")
    except Exception as exc:  # noqa: BLE001 - yaml's errors: say where the YAML is broken
        return _fail(f"{args.cloud_config} is not valid YAML: {exc}")

    redactor = Redactor()  # cpi.json's secrets: masked in whatever is printed
    redactor.collect(raw)
    findings, items = cloud_config.check(doc, cfg.cloud_class)
    notes: list[str] = []
    missing = missing_state(cfg) if args.online else None
    if missing:  # nothing made there yet: nothing to look up, and nothing is created to look
        findings.append(Finding("(online)", f"{missing}: nothing checked online", "info"))
    elif args.online:
        try:
            with waiting("asking the cloud", seconds, redactor.text):
                online = cloud_config.check_online(ready.cloud, items)
        except CliError as exc:
            return _fail(exc.message)
        except BoshError as exc:
            return _fail(redactor.text(exc.message))
        findings += online
    for finding in findings:
        finding.path = redactor.text(finding.path)
        finding.problem = redactor.text(finding.problem)

    errors = [f for f in findings if f.severity == "error"]
    if wants_data(args):
        print_data({"cloud": cfg.plugin, "online": args.online, "ok": not errors,
                    "findings": [f.to_dict() for f in findings], "notes": notes}, args)
    else:
        _print_table(args, cfg.plugin, findings, notes)
    return 1 if errors else 0


def _print_table(args: argparse.Namespace, plugin: str, findings, notes) -> None:
    """The findings, one per row (severity, YAML path, problem), then the verdict."""
    for note in notes:
        print(note)
    what = f"{args.cloud_config} against the {plugin} cloud" + (" (online)" if args.online else "")
    table = Table(what, ("severity", "path", "problem"), noun="finding")
    table.rows += [[f.severity, f.path, f.problem] for f in findings]
    if findings:
        print_table(table, args)
    errors = sum(1 for f in findings if f.severity == "error")
    verdict = (f"{what}: {plural(errors, 'error')}" if errors else
               f"ok: {what}: " + ("no problems found" if not findings else "no errors"))
    print(verdict)
