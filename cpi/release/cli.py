"""`cpi release build|vendor`: the command line of the release builder.

Usable three ways: `main(argv)` on its own (`python -m cpi.release build`), or hooked into
the project CLI with `add_parser(subparsers)`, which adds `release` with its subcommands
and sets `handler` (alias `func`) on the parsed arguments: `args.handler(args)` returns the
exit status (a ReleaseError is printed as `cpi release: error: ...` and gives 1).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cpi.release.errors import ReleaseError

DESCRIPTION = "Build this CPI's BOSH release (for bosh create-env and the director)."


def _build(args: argparse.Namespace) -> int:
    from cpi.release.builder import build_release, describe

    result = build_release(args.release_dir, args.out, version=args.version, tarball=args.tarball)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(describe(result))
    return 0


def _vendor(args: argparse.Namespace) -> int:
    from cpi.release import vendor
    from cpi.release.definition import load_definition

    release_dir = Path(args.release_dir).resolve()
    definition = load_definition(release_dir)
    if args.python_source:
        target = vendor.add_python_source(release_dir, definition, Path(args.python_source))
        print(f"CPython source: {target.relative_to(release_dir)}")
    if args.wheels:
        platforms = list(args.platform or [])
        if args.host:
            platforms.append(vendor.host_platform())
        counts = vendor.vendor_wheels(release_dir, definition, platforms or None)
        directory = vendor.wheels_dir(release_dir, definition.vendor)
        summary = ", ".join(f"{name}: {count}" for name, count in counts.items())
        print(f"Wheels: {directory.relative_to(release_dir)}/ ({summary})")
    return 0


def _guarded(command):
    """`command` with a ReleaseError turned into its message and exit status 1: the
    message says what to fix, a traceback would only hide it."""

    def handler(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except ReleaseError as exc:
            print(f"cpi release: error: {exc}", file=sys.stderr)
            return 1

    return handler


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the build and vendor subcommands to `parser`."""
    commands = parser.add_subparsers(dest="release_command", metavar="COMMAND", required=True)

    build = commands.add_parser(
        "build",
        help="check the release and write its tarball",
        description="Check jobs/ and packages/ as bosh create-release does, compute bosh-cli "
        "fingerprints and write a deterministic release tarball.",
    )
    build.add_argument("--release-dir", default=".", help="directory holding release.yml (default: .)")
    build.add_argument("--out", default=None, help="output directory (default: <release-dir>/dev_releases)")
    build.add_argument("--tarball", default=None, help="exact output path (overrides --out)")
    build.add_argument("--version", default=None, help="release version (default: release.yml's)")
    build.set_defaults(handler=_guarded(_build), func=_guarded(_build))

    vendor = commands.add_parser(
        "vendor",
        help="download the wheels and add the CPython source as blobs",
        description="Put the blobs the packages need under the blobs root (git-ignored): the "
        "runtime wheels for every platform in release.yml, and the CPython source tarball you give.",
    )
    vendor.add_argument("--release-dir", default=".", help="directory holding release.yml (default: .)")
    vendor.add_argument(
        "--platform",
        action="append",
        metavar="NAME",
        help="vendor wheels only for this platform (repeatable; default: all of release.yml's)",
    )
    vendor.add_argument("--host", action="store_true", help="vendor wheels for this machine's platform")
    vendor.add_argument(
        "--python-source", metavar="PATH", help="CPython source tarball (Python-X.Y.Z.tgz or .tar.xz) to add"
    )
    vendor.add_argument(
        "--no-wheels", dest="wheels", action="store_false", help="do not download wheels (e.g. only add the source)"
    )
    vendor.set_defaults(handler=_guarded(_vendor), func=_guarded(_vendor))
    return parser


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Hook `release` into a parent CLI's subparsers."""
    parser = subparsers.add_parser("release", help=DESCRIPTION, description=DESCRIPTION)
    return configure(parser)


def main(argv: Sequence[str] | None = None) -> int:
    parser = configure(argparse.ArgumentParser(prog="cpi release", description=DESCRIPTION))
    args = parser.parse_args(argv)
    return args.handler(args)
