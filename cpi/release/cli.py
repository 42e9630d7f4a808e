"""`cpi release build|vendor|sbom`: the command line of the release builder.

Usable three ways: `main(argv)` on its own (`python -m cpi.release build`), or hooked into
the project CLI with `add_parser(subparsers, name, summary)`, which adds `release` with its
subcommands and sets `handler` (alias `func`) on the parsed arguments: `args.handler(args)`
returns the exit status (a ReleaseError is printed as `cpi release: error: ...` and gives 1).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from cpi.release.errors import ReleaseError

DESCRIPTION = "Build this CPI's BOSH release (for bosh create-env and the director)."

EXAMPLES = """\
examples:
  cpi release vendor --python-source ~/Downloads/Python-3.11.14.tgz
  cpi release build                      # -> <checkout>/dev_releases/bosh-python-cpi-<version>.tgz
  cpi release build --tarball /tmp/cpi.tgz --version 0.2.0
  cpi release build --release-dir ../other-checkout

Works from any directory: the release is this checkout's unless --release-dir names another."""

BUILD_EXAMPLES = """\
examples:
  cpi release build
  cpi release build --out /tmp/releases
  cpi release build --tarball ./cpi.tgz --version 0.2.0-dev.1
  SOURCE_DATE_EPOCH=0 cpi release build  # choose the archive timestamp"""

VENDOR_EXAMPLES = """\
examples:
  cpi release vendor --python-source ~/Downloads/Python-3.11.14.tgz
  cpi release vendor --host                        # wheels for this machine only
  cpi release vendor --platform linux-x86_64 --platform linux-aarch64
  cpi release vendor --no-wheels --python-source python3.11_3.11.2.orig.tar.gz"""


def default_release_dir() -> Path:
    """This checkout (the directory holding release.yml next to the cpi package), whatever
    the current directory is; the current directory when the package is installed apart
    from a checkout."""
    checkout = Path(__file__).resolve().parents[2]
    return checkout if (checkout / "release.yml").is_file() else Path.cwd()


def _build(args: argparse.Namespace) -> int:
    from cpi.release.builder import build_release, describe

    result = build_release(_release_dir(args), args.out, version=args.version, tarball=args.tarball)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(describe(result))
    return 0


def _vendor(args: argparse.Namespace) -> int:
    from cpi.release import vendor
    from cpi.release.definition import load_definition

    release_dir = _release_dir(args)
    definition = load_definition(release_dir)
    if args.python_source:
        target = vendor.add_python_source(release_dir, definition, Path(args.python_source))
        print(f"CPython source: {target.relative_to(release_dir)}")
    if args.wheels:
        platforms = list(args.platform or [])
        if args.host:
            platforms.append(vendor.host_platform())
        counts = vendor.vendor_wheels(release_dir, definition, platforms or None)
        assert definition.vendor is not None, "vendor_wheels refuses a release.yml without a vendor section"
        directory = vendor.wheels_dir(release_dir, definition.vendor)
        summary = ", ".join(f"{name}: {count}" for name, count in counts.items())
        print(f"Wheels: {directory.relative_to(release_dir)}/ ({summary})")
    return 0


def _sbom(args: argparse.Namespace) -> int:
    from cpi.release.sbom import MEMBER, pretty, read_from, table

    data = read_from(Path(args.tarball))
    try:
        print(table(data) if args.table else pretty(data))
    except (ValueError, AttributeError, TypeError) as exc:
        raise ReleaseError(f"{args.tarball}: its {MEMBER} is not a CycloneDX JSON document ({exc})") from None
    return 0


RELEASE_DIR_HELP = "directory holding release.yml (default: this checkout, whatever the current directory)"


def _release_dir(args: argparse.Namespace) -> Path:
    """--release-dir (relative to the current directory), or this checkout."""
    return Path(args.release_dir).resolve() if args.release_dir else default_release_dir()


def _guarded(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`command` with a ReleaseError turned into its message and exit status 1: the
    message says what to fix, a traceback would only hide it."""

    def handler(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except ReleaseError as exc:
            print(f"cpi release: error: {exc}", file=sys.stderr)
            return 1

    return handler


def _command(commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str,
             command: Callable[[argparse.Namespace], int], summary: str, description: str,
             epilog: str) -> argparse.ArgumentParser:
    """A subcommand that runs `command` (_guarded), its description and examples printed
    as written (their line breaks are meant)."""
    parser = commands.add_parser(name, help=summary, description=description, epilog=epilog,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    handler = _guarded(command)
    parser.set_defaults(handler=handler, func=handler)
    return parser


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the build, vendor and sbom subcommands to `parser`."""
    commands = parser.add_subparsers(dest="release_command", metavar="COMMAND", required=True)

    build = _command(
        commands, "build", _build, "check the release and write its tarball",
        "Check jobs/ and packages/ as bosh create-release does, compute bosh-cli\n"
        "fingerprints and write a deterministic release tarball.",
        BUILD_EXAMPLES,
    )
    vendor = _command(
        commands, "vendor", _vendor, "download the wheels and add the CPython source as blobs",
        "Put the blobs the packages need under the blobs root (git-ignored): the\n"
        "runtime wheels for every platform in release.yml, and the CPython source tarball you give.",
        VENDOR_EXAMPLES,
    )

    for reads_the_release in (build, vendor):
        reads_the_release.add_argument("--release-dir", default=None, metavar="DIR", help=RELEASE_DIR_HELP)

    build.add_argument("--out", default=None, metavar="DIR",
                       help="output directory (default: <release-dir>/dev_releases)")
    build.add_argument("--tarball", default=None, metavar="PATH", help="exact output path (overrides --out)")
    build.add_argument("--version", default=None, metavar="V", help="release version (default: release.yml's)")

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

    sbom = _command(
        commands, "sbom", _sbom, "print the bill of materials a built release carries",
        "Print sbom.cdx.json of a release tarball: the CycloneDX SBOM that `build` puts in it,\n"
        "naming every vendored wheel and the CPython source with its version, licence and sha256.",
        "examples:\n  cpi release sbom dev_releases/bosh-python-cpi-0.1.0.tgz\n"
        "  cpi release sbom --table dev_releases/bosh-python-cpi-0.1.0.tgz",
    )
    sbom.add_argument("tarball", metavar="TARBALL", help="a release tarball `cpi release build` wrote")
    sbom.add_argument("--table", action="store_true", help="one line per component instead of the JSON")
    return parser


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], name: str = "release",
               summary: str = "build this CPI's BOSH release (vendor, build)") -> argparse.ArgumentParser:
    """Hook `release` into a parent CLI's subparsers (`cpi`'s command table gives the name
    and the one-line help)."""
    parser = subparsers.add_parser(name, help=summary, description=DESCRIPTION, epilog=EXAMPLES,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    return configure(parser)


def main(argv: Sequence[str] | None = None) -> int:
    parser = configure(argparse.ArgumentParser(prog="cpi release", description=DESCRIPTION, epilog=EXAMPLES,
                                               formatter_class=argparse.RawDescriptionHelpFormatter))
    args = parser.parse_args(argv)
    return args.handler(args)
