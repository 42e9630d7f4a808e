"""The blobs the packages need offline: wheels for every compile-host platform, and the
CPython source.

A BOSH package compiles on a machine that may have no index access (a compilation VM),
or on the operator's own Linux or Mac (`bosh create-env`). So the cpi package installs
its dependencies with `pip install --no-index --require-hashes` from wheels shipped in the
release, at the versions and with the bytes requirements.lock pins (cpi/release/lock.py);
vendoring first checks, offline, that the lock has a wheel for every platform asked for
(cpi/release/lockfiles.py). Most are pure Python (`py3-none-any`, shared by all
platforms); a few are compiled (pydantic-core, cryptography, cffi, PyYAML, psutil...) and
exist once per platform. The layout under the blobs root:

    wheels/requirements.txt      the runtime closure as requirements.lock pins it (each
                                 line with the sha256 of the wheels vendored), under a
                                 header naming the CPython version, the platforms vendored
                                 and the lock
    wheels/any/*.whl             pure-Python wheels, and pip's own: package cpi runs pip from
                                 its wheel, so neither package has to install pip
    wheels/<platform>/*.whl      compiled wheels, one directory per platform in release.yml
    wheels/SHA256SUMS            the sha256 of every file above (cpi/release/checksums.py),
                                 which package cpi checks before it runs anything from a wheel
    python3/Python-3.X.Y.tgz     the CPython source (operator-supplied: python.org's
                                 tarball, or Debian's identical python3.X_3.X.Y.orig.tar.gz)

Wheels and sources are large, so they live in the git-ignored blobs root and never in git.
"""

from __future__ import annotations

import json
import platform as _platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cpi.release import checksums, lock, lockfiles
from cpi.release.definition import ReleaseDefinition, VendorSettings
from cpi.release.errors import ReleaseError
from cpi.release.lock import project_requirements
from cpi.release.lockfiles import INSTALLER
from cpi.release.targets import PATCH_RANGE, marker_environment, pip_platform_tags

REQUIREMENTS = "requirements.txt"
PURE = "any"
SOURCE_RE = re.compile(r"^Python-(3\.\d+)\.(\d+)(?:[a-z]+\d*)?\.(tgz|tar\.gz|tar\.xz)$")
SOURCE_DIR_RE = re.compile(r"^Python-(3\.\d+\.\d+(?:[a-z]+\d*)?)$")


def host_platform() -> str:
    """This machine's platform name, as packages/cpi/packaging computes it from uname."""
    machine = _platform.machine().lower()
    if sys.platform.startswith("linux"):
        arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
        libc = _platform.libc_ver()[0]
        return f"linux-{arch}" + ("" if libc == "glibc" or not libc else "-musl")
    if sys.platform == "darwin":
        return f"macos-{'arm64' if machine == 'arm64' else machine}"
    return f"{sys.platform}-{machine}"


def requirements_text(
    requirements: Sequence[str], python: str, platforms: Sequence[str], lock: str = "", pinned: Sequence[str] = ()
) -> str:
    """wheels/requirements.txt: a header (the CPython version and platforms vendored, which
    packages/cpi/packaging reads; the lock's sha256 and pyproject.toml's requirements, which
    `cpi release build` compares with the checkout's) and the locked lines, with the hashes
    of the wheels vendored, that package cpi installs with `pip --require-hashes`."""
    return (
        "# Written by `cpi release vendor` from requirements.lock: the CPI's runtime closure,\n"
        "# installed offline (pip --require-hashes) by packages/cpi/packaging from the wheels\n"
        "# beside this file.\n"
        f"# python: {python}\n"
        f"# platforms: {' '.join(sorted(platforms))}\n"
        f"# lock: {lock}\n"
        + "".join(f"# requires: {r}\n" for r in requirements)
        + "".join(f"{line}\n" for line in pinned)
    )


@dataclass
class VendoredState:
    """What requirements.txt says was vendored."""

    python: str | None
    platforms: list[str]
    requirements: list[str]
    lock: str | None = None
    pinned: list[str] = field(default_factory=list)


def read_requirements(path: Path) -> VendoredState:
    state = VendoredState(None, [], [])
    for line in path.read_text().splitlines():
        if line.startswith("# python:"):
            state.python = line.split(":", 1)[1].strip()
        elif line.startswith("# platforms:"):
            state.platforms = line.split(":", 1)[1].split()
        elif line.startswith("# lock:"):
            state.lock = line.split(":", 1)[1].strip() or None
        elif line.startswith("# requires:"):
            state.requirements.append(line.split(":", 1)[1].strip())
        elif line.strip() and not line.startswith("#"):
            state.pinned.append(line.strip())
    return state


# --- wheels -------------------------------------------------------------------------------


def is_pure(wheel: Path) -> bool:
    """A wheel that runs anywhere: its platform tag (the last one) is `any`."""
    return wheel.name.endswith("-any.whl")


PipRunner = Callable[[list[str], dict[str, str]], None]
PIP_TIMEOUT = 1800  # seconds for one platform's download

# pip evaluates a requirement's environment markers (`async-timeout; python_full_version <
# "3.11.3"`, `...; sys_platform == "darwin"`) against the interpreter running it, whatever
# --python-version and --platform say. run_pip runs pip with the compile host's values
# instead: TARGET_MARKERS replaces the default environment pip's `packaging` reads with the
# JSON object in argv[1].
TARGET_MARKERS = """
import json, sys
target = json.loads(sys.argv.pop(1))
from pip._vendor.packaging import markers
host = markers.default_environment
markers.default_environment = lambda: {**host(), **target}
"""
PIP_WITH_TARGET_MARKERS = TARGET_MARKERS + "from pip._internal.cli.main import main\nsys.exit(main(sys.argv[1:]))\n"
def run_pip(args: list[str], environment: dict[str, str] | None = None) -> None:
    """Run pip with this interpreter, its markers evaluated in `environment` (see
    TARGET_MARKERS); pip's own index settings (pip.conf, PIP_INDEX_URL) apply."""
    command = [sys.executable, "-c", PIP_WITH_TARGET_MARKERS, json.dumps(environment or {}), *args]
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=PIP_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise ReleaseError(f"pip download took more than {PIP_TIMEOUT} s (is the package index reachable?)") from None
    if result.returncode != 0:
        raise ReleaseError(
            "pip download failed (is the package index reachable?):\n  pip "
            + " ".join(args)
            + "\n"
            + (result.stderr.strip() or result.stdout.strip())[-4000:]
        )


def download_wheels(
    requirements: Sequence[str],
    python: str,
    platforms: dict[str, list[str]],
    destination: Path,
    pip: PipRunner = run_pip,
    constraints: Path | None = None,
) -> dict[str, list[Path]]:
    """Download the binary closure of `requirements`, and pip, for each platform into
    destination/<platform>/, with the markers of that platform and of each end of
    PATCH_RANGE, at the versions `constraints` (the lock) pins; return the wheels per
    platform."""
    downloaded = {}
    for name, tags in platforms.items():
        target = destination / name
        target.mkdir(parents=True, exist_ok=True)
        args = ["download", "--quiet", "--only-binary=:all:", "--dest", str(target)]
        if constraints is not None:
            args += ["--constraint", str(constraints)]
        for tag in pip_platform_tags(tags):
            args += ["--platform", tag]
        args += ["--python-version", python, "--implementation", "cp", INSTALLER, *requirements]
        for patch in PATCH_RANGE:
            pip(args, marker_environment(name, f"{python}.{patch}"))
        downloaded[name] = sorted(target.glob("*.whl"))
        if not downloaded[name]:
            raise ReleaseError(f"pip downloaded no wheels for platform {name} ({', '.join(tags)})")
    return downloaded


WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


def locked_lines(downloaded: dict[str, list[Path]], pins: Sequence[lock.Pin],
                 files: dict[str, frozenset[str]] | None = None) -> list[str]:
    """Check that every downloaded wheel is a file the lock pins (name, version and sha256)
    and return the lock's lines for the closure, each accepting only the hashes of the
    wheels vendored: package cpi installs them with `--require-hashes`, so a compile host
    installs these bytes or nothing. pip itself is checked but not listed (package cpi runs
    it from its wheel and does not install it). With `files` (locked_files), each wheel's
    name must also be the one the lock gives those bytes."""
    table = lock.by_version(list(pins))
    accepted: dict[tuple[str, str], set[str]] = {}
    for wheel in sorted({w for wheels in downloaded.values() for w in wheels}):
        match = WHEEL_NAME.match(wheel.name)
        if not match:
            raise ReleaseError(f"pip downloaded {wheel.name}, which is not named as a wheel is")
        key = (lock.canonical(match["name"]), match["version"])
        pin = table.get(key)
        if pin is None:
            raise ReleaseError(
                f"pip downloaded {wheel.name}, a version requirements.lock does not pin: the lock no longer "
                f"holds the runtime closure of pyproject.toml ({lock.UPDATE})"
            )
        sha256 = checksums.sha256_file(wheel)
        if sha256 not in pin.hashes:
            raise ReleaseError(
                f"{wheel.name}: its sha256 {sha256} is not one requirements.lock accepts for "
                f"{pin.name}=={pin.version} (the index served other bytes than were locked)"
            )
        problem = unlocked(wheel, sha256, files) if files is not None else None
        if problem:  # the pin's bytes, but under another file's name (requirements.files)
            raise ReleaseError(f"pip downloaded {problem}: nothing was vendored")
        accepted.setdefault(key, set()).add(sha256)
    return [table[key].line(frozenset(hashes)) for key, hashes in sorted(accepted.items()) if key[0] != INSTALLER]


def arrange_wheels(
    downloaded: dict[str, list[Path]],
    wheels_dir: Path,
    requirements: Sequence[str],
    python: str,
    lock_digest: str = "",
    pinned: Sequence[str] = (),
) -> dict[str, int]:
    """Replace `wheels_dir` with: pure wheels (deduplicated by file name) in any/, compiled
    ones per platform, and requirements.txt. Returns the number of wheels per directory."""
    staging = wheels_dir.with_name(wheels_dir.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / PURE).mkdir(parents=True)
    counts = {PURE: 0}
    for name, wheels in sorted(downloaded.items()):
        (staging / name).mkdir()
        counts[name] = 0
        for wheel in wheels:
            if is_pure(wheel):
                target = staging / PURE / wheel.name
                if not target.exists():
                    shutil.copyfile(wheel, target)
                    counts[PURE] += 1
            else:
                shutil.copyfile(wheel, staging / name / wheel.name)
                counts[name] += 1
    (staging / REQUIREMENTS).write_text(requirements_text(requirements, python, list(downloaded), lock_digest, pinned))
    checksums.write(staging)
    shutil.rmtree(wheels_dir, ignore_errors=True)
    staging.rename(wheels_dir)
    return counts


def vendor_wheels(
    release_dir: Path,
    definition: ReleaseDefinition,
    platforms: Sequence[str] | None = None,
    python: str | None = None,
    pip: PipRunner = run_pip,
) -> dict[str, int]:
    """Download and arrange the wheels for `platforms` (default: all of release.yml's).
    `python` overrides release.yml's version (tests vendor for the running interpreter)."""
    vendor = _settings(definition)
    names = list(platforms) if platforms else list(vendor.platforms)
    unknown = [name for name in names if name not in vendor.platforms]
    if unknown:
        raise ReleaseError(
            f"unknown platform(s) {', '.join(unknown)}: release.yml vendor.platforms has "
            f"{', '.join(vendor.platforms)} (add a platform there with its pip --platform tags)"
        )
    requirements = project_requirements(release_dir)
    pins = lock.read(release_dir)
    python = python or vendor.python
    platform_tags = {name: vendor.platforms[name] for name in names}
    # Offline, before any download: a platform the lock has no wheel for fails here, named,
    # instead of as pip's ResolutionImpossible after the other platforms' downloads.
    lockfiles.check(release_dir, requirements, python, platform_tags)
    with tempfile.TemporaryDirectory(prefix="cpi-vendor-") as tmp:
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text("".join(f"{pin.constraint()}\n" for pin in pins))
        downloaded = download_wheels(
            requirements, python, platform_tags, Path(tmp) / "wheels", pip,
            constraints,
        )
        pinned = locked_lines(downloaded, pins, locked_files(release_dir))
        return arrange_wheels(
            downloaded, wheels_dir(release_dir, vendor), requirements, python, lock.digest(release_dir), pinned
        )


# --- CPython source ----------------------------------------------------------------------


def python_source_version(source: Path) -> tuple[str, str]:
    """(full version, archive suffix) of a CPython source tarball, read from its contents:
    one top-level Python-X.Y.Z/ directory holding a configure script."""
    if not source.is_file():
        raise ReleaseError(
            f"CPython source tarball {source} does not exist. Download Python-X.Y.Z.tgz from "
            f"python.org (or Debian's python3.X_X.Y.Z.orig.tar.gz, the same file) and pass its path"
        )
    try:
        with tarfile.open(source, "r:*") as tar:
            tops, has_configure = set(), False
            for member in tar:
                top = member.name.lstrip("./").split("/", 1)[0]
                if top:
                    tops.add(top)
                if re.fullmatch(r"\.?/?Python-[^/]+/configure", member.name):
                    has_configure = True
                if len(tops) > 1:
                    break
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ReleaseError(f"{source}: not a readable tar archive ({exc})") from None
    found = SOURCE_DIR_RE.match(next(iter(tops))) if len(tops) == 1 else None
    if found is None or not has_configure:
        raise ReleaseError(
            f"{source}: not a CPython source tarball (expected one top-level Python-X.Y.Z/ directory "
            f"with a configure script; found {', '.join(sorted(tops)[:3]) or 'nothing'})"
        )
    version = found.group(1)
    with open(source, "rb") as handle:
        magic = handle.read(6)
    suffix = "tar.xz" if magic.startswith(b"\xfd7zXZ") else "tgz" if magic.startswith(b"\x1f\x8b") else None
    if suffix is None:
        raise ReleaseError(f"{source}: compress it with gzip or xz (the compile host's tar must unpack it)")
    return version, suffix


def add_python_source(release_dir: Path, definition: ReleaseDefinition, source: Path) -> Path:
    """Copy the CPython source into the blobs as python3/Python-X.Y.Z.<tgz|tar.xz>,
    replacing any other version there."""
    vendor = _settings(definition)
    version, suffix = python_source_version(source)
    if not version.startswith(vendor.python + "."):
        raise ReleaseError(
            f"{source} is CPython {version}, but release.yml vendor.python is {vendor.python}: the "
            f"wheels are built for one minor version (change vendor.python and re-vendor the wheels)"
        )
    directory = release_dir / vendor.blobs_root / vendor.python_source_dir
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"Python-{version}.{suffix}"
    temporary = target.with_name(target.name + ".part")
    shutil.copyfile(source, temporary)
    for old in directory.glob("Python-*"):
        if old != temporary:
            old.unlink()
    temporary.rename(target)
    return target


# --- checks at build time ------------------------------------------------------------------


def wheels_dir(release_dir: Path, vendor: VendorSettings) -> Path:
    return release_dir / vendor.blobs_root / vendor.wheels_dir


def check_vendored(release_dir: Path, definition: ReleaseDefinition) -> list[str]:
    """Fail with the command to run when blobs are missing or stale; return warnings."""
    vendor = definition.vendor
    if vendor is None:
        return []
    warnings = []
    requirements_path = wheels_dir(release_dir, vendor) / REQUIREMENTS
    if not requirements_path.is_file():
        raise ReleaseError(
            f"{requirements_path} is missing: the wheels are blobs, not in git. Run `cpi release vendor` "
            f"(downloads them for {', '.join(vendor.platforms)}), then build again"
        )
    state = read_requirements(requirements_path)
    if state.python != vendor.python:
        raise ReleaseError(
            f"the vendored wheels are for CPython {state.python}, release.yml vendor.python is "
            f"{vendor.python}: run `cpi release vendor` again"
        )
    current = project_requirements(release_dir)
    if state.requirements != current:
        raise ReleaseError(
            f"the vendored wheels are stale: pyproject.toml requires {current}, they were downloaded "
            f"for {state.requirements}. Run `cpi release vendor` again"
        )
    if state.lock != lock.digest(release_dir):
        raise ReleaseError(
            "the vendored wheels are stale: requirements.lock changed since they were downloaded "
            "(or they were not downloaded from it). Run `cpi release vendor` again"
        )
    pure = wheels_dir(release_dir, vendor) / PURE
    installers = sorted(pure.glob(f"{INSTALLER}-*.whl"))
    if len(installers) != 1:
        raise ReleaseError(
            f"{pure}/ holds {len(installers)} {INSTALLER} wheels, not one: package cpi installs the "
            f"others with it. Run `cpi release vendor` again"
        )
    check_files(release_dir, wheels_dir(release_dir, vendor), state)
    missing = [name for name in vendor.platforms if name not in state.platforms]
    if missing:
        warnings.append(
            f"no wheels vendored for {', '.join(missing)}: package cpi will not compile there "
            f"(run `cpi release vendor` without --platform for all of release.yml's platforms)"
        )
    source_dir = release_dir / vendor.blobs_root / vendor.python_source_dir
    sources = sorted(source_dir.glob("Python-*")) if source_dir.is_dir() else []
    if not sources:
        raise ReleaseError(
            f"no CPython source in {source_dir}/: it is a blob the operator supplies. Run "
            f"`cpi release vendor --python-source PATH` with a CPython {vendor.python}.x source tarball "
            f"(python.org's Python-{vendor.python}.N.tgz, or Debian's "
            f"python{vendor.python}_{vendor.python}.N.orig.tar.gz)"
        )
    if len(sources) > 1:
        raise ReleaseError(f"several CPython sources in {source_dir}/ ({', '.join(s.name for s in sources)}): keep one")
    match = SOURCE_RE.match(sources[0].name)
    if not match or match.group(1) != vendor.python:
        raise ReleaseError(
            f"{sources[0]} is not a CPython {vendor.python}.x source named Python-{vendor.python}.N.tgz "
            f"(or .tar.xz): add it with `cpi release vendor --python-source PATH`"
        )
    return warnings


def locked_files(release_dir: Path) -> dict[str, frozenset[str]]:
    """File name -> the sha256 the lock accepts for it: requirements.files names each hash
    of requirements.lock, and only hashes the lock itself holds count."""
    hashes = {sha256 for pin in lock.read(release_dir) for sha256 in pin.hashes}
    accepted: dict[str, set[str]] = {}
    for sha256, name in lockfiles.read(release_dir).items():
        if sha256 in hashes:
            accepted.setdefault(name, set()).add(sha256)
    return {name: frozenset(found) for name, found in accepted.items()}


def unlocked(path: Path, sha256: str, accepted: dict[str, frozenset[str]]) -> str | None:
    """Why the file at `path` with `sha256` is not one the lock accepts (None: it is)."""
    if path.name not in accepted:
        return f"{path} (sha256 {sha256}), a file requirements.lock does not accept"
    if sha256 not in accepted[path.name]:
        return (
            f"{path} with sha256 {sha256}, but requirements.lock accepts only "
            f"{', '.join(sorted(accepted[path.name]))} for it"
        )
    return None


def check_files(release_dir: Path, directory: Path, state: VendoredState) -> None:
    """Re-hash every vendored file before it is packed: each wheel (pip's included) must be
    a file the lock accepts, byte for byte, requirements.txt may accept only locked hashes,
    and SHA256SUMS, which package cpi checks before it runs anything, must list exactly
    these files. A file changed, added or left behind after vendoring fails the build, named."""
    accepted = locked_files(release_dir)
    found = []
    for name in checksums.files(directory):
        path = directory / name
        if name == REQUIREMENTS:
            continue
        if path.is_symlink() or not path.is_file() or not name.endswith(".whl"):
            found.append(f"{path} is not a wheel `cpi release vendor` writes")
            continue
        problem = unlocked(path, checksums.sha256_file(path), accepted)
        if problem:
            found.append(problem)
    locked = {(pin.key, pin.version): pin.hashes for pin in lock.read(release_dir)}
    for pin in lock.parse("\n".join(state.pinned), str(directory / REQUIREMENTS)) if state.pinned else []:
        stray = pin.hashes - locked.get((pin.key, pin.version), frozenset())
        if stray:
            found.append(f"{directory / REQUIREMENTS} accepts {pin.name}=={pin.version} with sha256 "
                         f"{', '.join(sorted(stray))}, which requirements.lock does not")
    if not found:
        found = checksums.problems(directory)
    if found:
        raise ReleaseError(
            "the vendored files are not the locked ones:\n  " + "\n  ".join(found)
            + "\nRun `cpi release vendor` again (it downloads and checks every file afresh), then build again"
        )


def _settings(definition: ReleaseDefinition) -> VendorSettings:
    if definition.vendor is None:
        raise ReleaseError("release.yml has no vendor section: nothing to vendor")
    return definition.vendor
