"""requirements.lock is the one source of versions: it satisfies what pyproject.toml asks,
bin/bootstrap's venv is exactly it, the generated EC2 model follows its botocore, and it
has a wheel of every compiled runtime package for every platform release.yml vendors
(read from requirements.files, the file names bin/lock records beside it)."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import parse_sdist_filename, parse_wheel_filename

from cpi.release import lockfiles
from cpi.release.definition import load_definition
from cpi.release.lock import Pin, canonical, project_requirements, read
from cpi.release.lock import parse as parse_lock
from cpi.release.targets import marker_environment
from tests.support.runner import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PINS = read(ROOT)
PROJECT = canonical(PYPROJECT["project"]["name"])


def applies(pin: Pin) -> bool:
    return pin.marker is None or Marker(pin.marker).evaluate()


def locked_here() -> dict[str, str]:
    return {pin.key: pin.version for pin in PINS if applies(pin)}


def wanted() -> list[Requirement]:
    project = PYPROJECT["project"]
    texts = [*project["dependencies"], *project["optional-dependencies"]["test"],
             *PYPROJECT["build-system"]["requires"], "pip"]
    return [Requirement(text) for text in texts]


def test_the_lock_satisfies_every_range_of_pyproject():
    locked = {pin.key: pin for pin in PINS}
    for requirement in wanted():
        pin = locked.get(canonical(requirement.name))
        assert pin is not None, f"{requirement} is not in requirements.lock: run bin/lock"
        assert requirement.specifier.contains(pin.version, prereleases=True), \
            f"requirements.lock pins {pin.name}=={pin.version}, outside pyproject.toml's {requirement}: run bin/lock"
        for extra in requirement.extras:  # moto[server]: what the extra pulls in is locked too
            metadata = importlib.metadata.metadata(requirement.name)
            for text in metadata.get_all("Requires-Dist") or []:
                needed = Requirement(text)
                if needed.marker and needed.marker.evaluate({"extra": extra}) and \
                        not needed.marker.evaluate({"extra": ""}):
                    assert canonical(needed.name) in locked, f"{needed.name} ({requirement}) is not locked"


def test_every_lock_entry_is_exact_and_hashed():
    assert PINS, "requirements.lock holds no entry"
    for pin in PINS:
        assert pin.hashes and all(len(h) == 64 for h in pin.hashes), pin
        assert "*" not in pin.version and "," not in pin.version, pin


def test_the_venv_is_exactly_the_lock():
    """bin/bootstrap installed the lock and nothing else (a venv built from an older lock is
    rebuilt, its stamp naming the lock)."""
    installed = {canonical(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()}
    installed.pop(PROJECT, None)
    expected = locked_here()
    assert installed == expected, {
        "installed, not locked": sorted(set(installed.items()) - set(expected.items())),
        "locked, not installed": sorted(set(expected.items()) - set(installed.items())),
    }


def test_the_venv_is_what_pip_finds_consistent():
    result = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_bootstrap_stamp_names_the_lock():
    """A changed lock reinstalls: the stamp's checksum covers requirements.lock."""
    stamps = list((ROOT / ".venv").glob(".installed-*"))
    assert len(stamps) == 1
    expected = subprocess.run(
        ["sh", "-c", 'cat pyproject.toml requirements.lock | cksum | cut -d" " -f1'],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert stamps[0].name == f".installed-{expected}"


def test_every_compiled_runtime_package_has_a_wheel_for_every_vendored_platform():
    """What `cpi release vendor` with its defaults needs: for each of release.yml's
    vendor.platforms, with pip's tag rules, a wheel of every package of the runtime closure
    (cryptography 49 and later have none for Intel Macs: bin/lock keeps those on 48)."""
    vendor = load_definition(ROOT).vendor
    assert vendor is not None
    problems = lockfiles.missing_wheels(PINS, lockfiles.read(ROOT), project_requirements(ROOT), vendor.python,
                                        vendor.platforms)
    assert problems == [], "\n".join(problems)


def test_requirements_files_names_the_files_of_the_lock():
    """requirements.files is bin/lock's record of this very lock: each name it gives a
    locked hash is a file of that pin's version, and every pin has its files named."""
    names = lockfiles.read(ROOT)
    owner = {sha256: pin for pin in PINS for sha256 in pin.hashes}
    assert set(names) <= set(owner), "requirements.files names files the lock does not accept: run bin/lock"
    for sha256, name in names.items():
        pin = owner[sha256]
        parsed = parse_wheel_filename(name)[:2] if name.endswith(".whl") else parse_sdist_filename(name)
        assert (canonical(parsed[0]), str(parsed[1])) == (pin.key, pin.version), (name, pin)
    unnamed = [f"{pin.name}=={pin.version}" for pin in PINS if not pin.hashes & names.keys()]
    assert not unnamed, f"requirements.files names no file of {unnamed}: run bin/lock"



def test_every_file_the_vendor_step_downloads_is_one_the_build_accepts():
    """`cpi release vendor` downloads, for each compile host, a wheel of every pin of the
    runtime closure, pip's (and setuptools', through pbr) included; the build accepts a
    vendored file only by its name and a sha256 of the lock (vendor.locked_files): each
    such pin has a wheel for that host that the build accepts."""
    from cpi.release.targets import PATCH_RANGE, wheel_tags
    from cpi.release.vendor import locked_files

    vendor = load_definition(ROOT).vendor
    assert vendor is not None
    accepted = locked_files(ROOT)
    for platform, tags in vendor.platforms.items():
        fitting = {name for name in accepted if name.endswith(".whl")
                   and set(parse_wheel_filename(name)[3]) & wheel_tags(vendor.python, tags)}
        for patch in PATCH_RANGE:
            closure = lockfiles.runtime_closure(PINS, project_requirements(ROOT),
                                                marker_environment(platform, f"{vendor.python}.{patch}"))
            assert {lockfiles.INSTALLER, "setuptools"} <= {pin.key for pin in closure}, platform
            unaccepted = [f"{pin.name}=={pin.version}" for pin in closure
                          if not any(accepted[name] & pin.hashes for name in fitting)]
            assert unaccepted == [], f"{platform}: no wheel the build accepts for {unaccepted}"


def test_bin_lock_installs_uv_only_with_the_hashes_it_pins():
    """bin/lock resolves every hash of the lock with uv: uv itself is installed with
    `pip --require-hashes` from bin/lock-requirements.txt, one exact version with the sha256
    of each of its wheels, and from nothing else."""
    script = (ROOT / "bin/lock").read_text()
    (install,) = [line for line in script.replace("\\\n", " ").splitlines() if "pip install" in line]
    assert "--require-hashes" in install and "--no-deps" in install
    assert '--requirement "$root/bin/lock-requirements.txt"' in install
    assert "uv==" not in install
    text = (ROOT / "bin/lock-requirements.txt").read_text()
    (pin,) = parse_lock(text, "bin/lock-requirements.txt")
    assert pin.name == "uv" and re.fullmatch(r"\d+\.\d+\.\d+", pin.version)
    assert len(pin.hashes) >= 4, "a wheel for Linux x86_64 and aarch64 and both macOS"
