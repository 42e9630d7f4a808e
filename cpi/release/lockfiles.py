"""requirements.files: the name of every file requirements.lock accepts, and the check that
the lock has a wheel of every compiled runtime package for every compile host.

The lock gives each pinned version the sha256 of its files, but a hash does not say which
platform a wheel is for, and `cpi release vendor` installs wheels only. A lock that pins a
version without a wheel for one of release.yml's vendor.platforms therefore failed late,
as pip's ResolutionImpossible in the middle of vendoring (cryptography 49 stopped
publishing wheels for Intel Macs while release.yml still named macos-x86_64). So bin/lock
writes requirements.files beside the lock, from uv's pylock.toml export of it (one
`sha256  file name` line per file, as sha256sum prints them), and this module reads both,
offline: `cpi release vendor` checks its platforms before it downloads anything, and
tests/unit/test_lock.py checks all of release.yml's on every run, so the lock and
release.yml cannot drift apart again unnoticed.

    python -m cpi.release.lockfiles PYLOCK_TOML     bin/lock: write requirements.files, check
"""

from __future__ import annotations

import sys
import tomllib
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from cpi.release import lock
from cpi.release.errors import ReleaseError, read_text
from cpi.release.targets import PATCH_RANGE, marker_environment, wheel_tags

FILES = "requirements.files"
INSTALLER = "pip"  # vendored beside the wheels: packages/cpi/packaging runs it from its wheel
HEADER = (
    "# Written by bin/lock from uv's pylock.toml export of requirements.lock: the file name of\n"
    "# each file the lock accepts, which its hashes do not say. cpi/release/lockfiles.py reads it\n"
    "# to check that every compiled runtime package has a wheel for every compile host.\n"
)


def files_path(root: Path) -> Path:
    return root / FILES


def record_text(pylock: Mapping) -> str:
    """requirements.files for uv's pylock.toml export (PEP 751) of the lock."""
    lines = set()
    for package in pylock.get("packages", []):
        files = ([package["sdist"]] if "sdist" in package else []) + list(package.get("wheels", []))
        for entry in files:
            name = entry.get("name") or urllib.parse.unquote(entry["url"].rsplit("/", 1)[-1])
            lines.add((name, entry["hashes"]["sha256"]))
    return HEADER + "".join(f"{sha256}  {name}\n" for name, sha256 in sorted(lines))


def read(root: Path) -> dict[str, str]:
    """sha256 -> file name, from requirements.files."""
    path = files_path(root)
    text = read_text(path, f"bin/lock writes it beside requirements.lock ({lock.UPDATE})")
    names = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        sha256, separator, name = line.partition("  ")
        if not separator or len(sha256) != 64 or not name.strip():
            raise ReleaseError(f"{path}: line {number} is not `sha256  file name`: {line!r}")
        names[sha256] = name.strip()
    return names


def applies(pin: lock.Pin, environment: dict[str, str]) -> bool:
    from packaging.markers import Marker  # see targets.wheel_tags: not installed in package cpi

    return pin.marker is None or Marker(pin.marker).evaluate(environment)


def runtime_closure(
    pins: Sequence[lock.Pin], requirements: Iterable[str], environment: dict[str, str]
) -> list[lock.Pin]:
    """The pins a compile host of `environment` installs: pyproject.toml's runtime
    `requirements` (and pip), then whatever the lock's `# via` says they require, each
    whose marker holds there."""
    from packaging.requirements import Requirement

    wanted = {lock.canonical(Requirement(text).name) for text in requirements} | {INSTALLER}
    here = [pin for pin in pins if applies(pin, environment)]
    closure: dict[str, lock.Pin] = {}
    grown = True
    while grown:
        grown = False
        for pin in here:
            if pin.key not in closure and (pin.key in wanted or pin.required_by & closure.keys()):
                closure[pin.key] = pin
                grown = True
    return sorted(closure.values(), key=lambda pin: pin.key)


def missing_wheels(
    pins: Sequence[lock.Pin],
    names: Mapping[str, str],
    requirements: Sequence[str],
    python: str,
    platforms: Mapping[str, Sequence[str]],
) -> list[str]:
    """What stops `cpi release vendor` for `platforms` (name -> pip --platform tags): each
    runtime pin without a wheel that host installs, named with the wheels it does have."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    problems: dict[str, None] = {}
    for platform, tags in platforms.items():
        accepted = wheel_tags(python, tags)
        for patch in PATCH_RANGE:
            for pin in runtime_closure(pins, requirements, marker_environment(platform, f"{python}.{patch}")):
                files = sorted(names[sha256] for sha256 in pin.hashes if sha256 in names)
                if not files:
                    problems[f"{FILES} names no file of {pin.name}=={pin.version}: {lock.UPDATE}"] = None
                    continue
                wheels = [name for name in files if name.endswith(".whl")]
                try:
                    fits = any(set(parse_wheel_filename(name)[3]) & accepted for name in wheels)
                except InvalidWheelFilename as exc:
                    raise ReleaseError(f"{FILES}: {exc}") from None
                if not fits:
                    platforms_of = sorted({name.rsplit("-", 1)[-1].removesuffix(".whl") for name in wheels})
                    problems[
                        f"{pin.name}=={pin.version} has no wheel for {platform} ({', '.join(tags)}), CPython "
                        f"{python}; its wheels are for: {', '.join(platforms_of) or 'none (source only)'}"
                    ] = None
    return list(problems)


def check(root: Path, requirements: Sequence[str], python: str, platforms: Mapping[str, Sequence[str]]) -> None:
    """Fail, naming each package and platform, when the lock cannot be vendored for
    `platforms`."""
    problems = missing_wheels(lock.read(root), read(root), requirements, python, platforms)
    if problems:
        raise ReleaseError(
            "requirements.lock cannot be vendored for every platform asked for:\n  "
            + "\n  ".join(problems)
            + "\nPin a version that has such wheels (bin/lock's constraints, then bin/lock), or change the "
            "platform's tags in release.yml vendor.platforms (or leave it out) and say so in docs/release.md"
        )


def main(argv: Sequence[str]) -> int:
    """bin/lock's last step: write requirements.files from uv's export, then check it
    against release.yml."""
    from cpi.release.definition import load_definition

    if len(argv) != 1:
        print("usage: python -m cpi.release.lockfiles PYLOCK_TOML", file=sys.stderr)
        return 2
    root = Path.cwd()
    files_path(root).write_text(record_text(tomllib.loads(Path(argv[0]).read_text())))
    vendor = load_definition(root).vendor
    try:
        if vendor is not None:
            check(root, lock.project_requirements(root), vendor.python, vendor.platforms)
    except ReleaseError as exc:
        print(f"bin/lock: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
