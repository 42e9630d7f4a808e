"""Fixtures of the release tests: Ruby for the ERB templates, and real wheels for this
machine's platform (downloaded once per session, through pip's cache)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.release.support import HOST_PYTHON


def _install_ruby() -> str | None:
    """Ruby from Debian's packages, when this is a Debian-like machine and we are root."""
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        return None
    from tests.support import suite

    env = suite.outside_env(DEBIAN_FRONTEND="noninteractive")
    for command in (
        ["apt-get", "-o", "DPkg::Lock::Timeout=120", "install", "-y", "-q", "ruby"],
        ["apt-get", "-o", "DPkg::Lock::Timeout=120", "update", "-q"],
        ["apt-get", "-o", "DPkg::Lock::Timeout=120", "install", "-y", "-q", "ruby"],
    ):
        try:
            subprocess.run(command, env=env, capture_output=True, timeout=600, check=False)
        except subprocess.TimeoutExpired:
            return None
        if shutil.which("ruby"):
            return shutil.which("ruby")
    return None


@pytest.fixture(scope="session")
def ruby() -> str:
    """The `ruby` that renders job templates, as bosh-cli uses the operator's ruby."""
    found = shutil.which("ruby") or _install_ruby()
    if not found:
        pytest.skip(
            "ruby is not installed and could not be installed (needs root and apt-get): "
            "the ERB templates are rendered with Ruby's ERB, as bosh create-env does"
        )
    return found


# What pip says when the index cannot be reached (and only then: a conflict or a missing
# version is a failure of the release, not of the network).
OFFLINE = ("NewConnectionError", "Failed to establish a new connection",
           "Temporary failure in name resolution", "Read timed out", "took more than")


@pytest.fixture(scope="session")
def host_wheels(tmp_path_factory) -> Path:
    """blobs/ of a copy of this project's release holding the real runtime wheels for this
    machine's platform and Python (not the release's four platforms: one download, cached
    by pip). Skips when the package index cannot be reached."""
    from cpi.release.definition import load_definition
    from cpi.release.errors import ReleaseError
    from cpi.release.vendor import host_platform, vendor_wheels
    from tests.release.support import copy_project_release

    release = copy_project_release(tmp_path_factory.mktemp("vendored") / "release")
    definition = load_definition(release)
    platform = host_platform()
    if platform not in definition.vendor.platforms:
        pytest.skip(f"this machine's platform {platform} is not in release.yml vendor.platforms")
    try:
        vendor_wheels(release, definition, [platform], python=HOST_PYTHON)
    except ReleaseError as exc:
        if any(sign in str(exc) for sign in OFFLINE):
            pytest.skip(f"cannot download the runtime wheels for {platform}: the package index is unreachable: {exc}")
        raise  # a lock pip cannot satisfy, a file whose hash differs: the release is broken
    return release / "blobs"
