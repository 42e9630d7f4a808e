"""A compile host as pip sees it: the platform tags of its wheels and the environment its
markers are evaluated in.

`cpi release vendor` downloads wheels for hosts it is not running on (release.yml's
vendor.platforms: a name such as macos-x86_64 and pip `--platform` tags), and
cpi/release/lockfiles.py checks, offline, that the lock has a wheel for each. Both must
judge a host alike, so both take its tags and markers from here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from packaging.tags import Tag

# A CPython minor version's first and (as far as markers compare) last patch release: the
# closure is downloaded for both, so a compile host's 3.X.N finds its wheels on either
# side of a `python_full_version` bound.
PATCH_RANGE = ("0", "99")


def marker_environment(platform_name: str, python_full: str) -> dict[str, str]:
    """The environment markers of CPython `python_full` on a compile host of `platform_name`
    (linux-x86_64, macos-arm64, ...); an unknown OS keeps this machine's OS values."""
    system, _, machine = platform_name.partition("-")
    machine = machine.removesuffix("-musl")
    environment = {
        "python_version": ".".join(python_full.split(".")[:2]),
        "python_full_version": python_full,
        "implementation_name": "cpython",
        "implementation_version": python_full,
        "platform_python_implementation": "CPython",
    }
    known = {"linux": ("linux", "Linux", "posix"), "macos": ("darwin", "Darwin", "posix")}
    if system in known:
        sys_platform, platform_system, os_name = known[system]
        environment.update(sys_platform=sys_platform, platform_system=platform_system, os_name=os_name,
                           platform_machine=machine)
    return environment


MANYLINUX = re.compile(r"^manylinux_2_(\d+)_(\w+)$")
LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}


def pip_platform_tags(tags: Sequence[str]) -> list[str]:
    """release.yml's tags with what each implies: a host of glibc 2.N runs every
    manylinux_2_M wheel for M <= N (and the legacy manylinux2014/2010/1 names of 2_17, 2_12
    and 2_5), but `pip download --platform` expands no manylinux tag by itself, so psutil
    7.2's wheels (tagged manylinux_2_12 and 2_28) would not be found for manylinux_2_17.
    macOS tags need no expansion here: pip accepts older macosx_X_Y wheels by itself
    (wheel_tags does the same)."""
    expanded: list[str] = []
    for tag in tags:
        expanded.append(tag)
        match = MANYLINUX.match(tag)
        if not match:
            continue
        glibc, arch = int(match.group(1)), match.group(2)
        for minor in range(glibc, 4, -1):
            expanded.append(f"manylinux_2_{minor}_{arch}")
            if minor in LEGACY_MANYLINUX:
                expanded.append(f"{LEGACY_MANYLINUX[minor]}_{arch}")
    return list(dict.fromkeys(expanded))


def wheel_tags(python: str, tags: Sequence[str]) -> set[Tag]:
    """Every wheel tag `pip download --only-binary=:all: --implementation cp --python-version
    <python> --platform <each of pip_platform_tags(tags)>` accepts: CPython's own ABI, the
    stable ABI of older versions and pure wheels, on each platform, a macOS tag standing for
    the older macOS versions and the universal2 builds of its architecture, as pip expands it.

    packaging is imported here, not at the top: a checkout's venv has it (pip and pytest
    need it), package cpi does not install it, and every module of cpi/ imports there."""
    from packaging.tags import compatible_tags, cpython_tags, mac_platforms

    platforms: list[str] = []
    for tag in pip_platform_tags(tags):
        mac = re.fullmatch(r"macosx_(\d+)_(\d+)_(\w+)", tag)
        platforms += list(mac_platforms((int(mac[1]), int(mac[2])), mac[3])) if mac else [tag]
    version = tuple(int(part) for part in python.split("."))
    interpreter = "cp" + "".join(python.split("."))
    return {*cpython_tags(version, [interpreter], platforms), *compatible_tags(version, interpreter, platforms)}
