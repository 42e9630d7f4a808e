"""The commands of `cpi`, in the order `cpi --help` lists them: the one place a command is
named. Each row says which module adds the command's parser and runs it, the heading it is
listed under, its one-line help and the example lines the top-level help shows.

A command's module is imported only when that command runs (pip's command table does the
same): `cpi list ...` imports cpi.cli.list and no other command, and `cpi --help` imports
none, as the top-level help needs nothing but this table. A module adds its parser with
`add_parser(subparsers, name, summary)`, taking its name and one-line help from here.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from .usage import Command

if TYPE_CHECKING:
    from collections.abc import Sequence

TRY = "try the CPI"
SEE = "see what the CPI manages"
CHECK = "check before a deploy"
REFERENCE = "reference and release"

COMMANDS: tuple[Command, ...] = (
    Command("lifecycle", "cpi.cli.lifecycle", TRY, "run a visible lifecycle on the embedded local cloud", [
        "cpi lifecycle                                  # a whole lifecycle on the local cloud"]),
    Command("call", "cpi.cli.call", TRY, "call one CPI method through bin/cpi and print the response", [
        "cpi call info                                  # one CPI method, as a director calls it",
        "cpi call --config cpi.json has_vm '\"vm-1234\"'  # relative paths are the current directory's"]),
    Command("list", "cpi.cli.list", SEE, "list the VMs, disks, stemcells or snapshots the CPI made", [
        "cpi list vms --config cpi.json                 # what the CPI made, with its BOSH tags"]),
    Command("show", "cpi.cli.show", SEE, "show one VM, disk, stemcell or snapshot in detail"),
    Command("avail", "cpi.cli.avail", SEE, "list the images, sizes, zones or networks a cloud-config may name"),
    Command("orphans", "cpi.cli.orphans", SEE,
            "find (and delete) what a director's CPI made that the director no longer knows", [
                "cpi orphans --config cpi.json --director-uuid UUID --known known.json"]),
    Command("audit", "cpi.cli.audit", SEE, "show the audit trail: every IaaS mutation the CPI made", [
        "cpi audit --config cpi.json --since 2h         # every IaaS change, old and new"]),
    Command("validate", "cpi.cli.validate", CHECK,
            "check cpi.json and a cloud-config against the cloud: every key a call would ignore, every "
            "mistake (--online: that what they name exists)", [
                "cpi validate cloud-config.yml --config cpi.json --online"]),
    Command("plan", "cpi.cli.plan", CHECK,
            "show what a CPI call would change, changing nothing (AWS: each change dry-run)", [
                "cpi plan create_disk 10240 '{\"type\": \"gp3\"}' --config cpi.json  # changes nothing"]),
    Command("certify", "cpi.cli.certify", CHECK,
            "run the whole lifecycle against a cloud account, then clean up everything it made", [
                "cpi certify --config cpi.json --stemcell IMAGE --stemcell-properties '{...}'"]),
    Command("props", "cpi.cli.props", REFERENCE, "print a cloud's config and cloud_properties reference (Markdown)", [
        "cpi props aws                                  # every aws property and cloud_property"]),
    Command("release", "cpi.release.cli", REFERENCE, "build this CPI's BOSH release (vendor, build)", [
        "cpi release build                              # the BOSH release, from any directory"], optional=True),
)


def available() -> list[Command]:
    """The table's commands this build has (an optional one's module may be left out)."""
    return [c for c in COMMANDS if not c.optional or _present(c.module)]


def _present(module: str) -> bool:
    from importlib.util import find_spec

    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:  # its package is not there either
        return False


def run(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` and run the command it names. The top-level parser knows every command
    by name and help; only the named command's module is imported, to add its real parser
    (argparse needs it to parse that command's options).

    Whatever a command raises that an operator can act on is one line on stderr and an exit
    status, never a traceback: a CliError its own status; a closed pipe (`cpi list vms
    --json | head -1`) nothing at all and 141, as a Unix tool killed by SIGPIPE; Ctrl-C 130."""
    import importlib

    from . import options, usage
    from .output import CliError, error_line

    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in argv if not a.startswith("-") and a in _names()), None)
    commands = available()
    parser, sub = usage.make_parser(commands)
    options.add_top(parser)
    parser.add_argument("-v", "--version", action=_Version, nargs=0, help="print the versions of cpi and its release")
    for command in commands:
        if command.name == chosen:
            importlib.import_module(command.module).add_parser(sub, command.name, command.help)
        else:
            sub.add_parser(command.name, help=command.help)
    args = parser.parse_args(argv)
    try:
        status = args.func(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at the interpreter's exit
        return status
    except CliError as exc:
        print(error_line(args.command, exc.message), file=sys.stderr)
        return exc.status
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    except KeyboardInterrupt:
        print(f"cpi {args.command}: interrupted", file=sys.stderr)
        return 130


class _Version(argparse.Action):
    """--version, read only when asked (release.yml is not read on every command)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(version_text())
        parser.exit()


def _names() -> set[str]:
    return {c.name for c in COMMANDS}


def _quiet_stdout() -> None:
    """After the reader of stdout went away: what is still buffered is dropped (the flush
    at exit would fail again and print a traceback)."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def version_text() -> str:
    """`cpi --version`: this CPI's version and, from a checkout (or a built release's
    source), the BOSH release's name and version as release.yml gives them, and how to read
    the SBOM a build puts in it."""
    from pathlib import Path

    import yaml

    from cpi import __version__

    text = f"cpi {__version__}"
    release = Path(__file__).resolve().parents[2] / "release.yml"
    try:
        spec = yaml.safe_load(release.read_text())
    except (OSError, yaml.YAMLError):  # an installed package without its checkout
        return text
    if isinstance(spec, dict) and spec.get("name") and spec.get("version"):
        text += f"\nrelease {spec['name']} {spec['version']} ({release})"
        text += (f"\nits bill of materials (CycloneDX): `cpi release sbom [--table] "
                 f"dev_releases/{spec['name']}-{spec['version']}.tgz` once built (docs/release.md)")
    return text
