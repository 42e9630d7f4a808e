"""What package cpi leaves out of its virtualenv: files the CPI never reads.

packages/cpi/packaging runs this file as a script, with the venv's interpreter, after pip
has installed the vendored wheels (so it imports nothing but the standard library):

    venv/bin/python -I cpi/release/lean.py SITE_PACKAGES
    venv/bin/python -I cpi/release/lean.py --check     # then: a client of each kept service

It removes, and prints how much it removed:

- botocore's data for every service the CPI never makes a client for (botocore ships ~440;
  the CPI calls the ones in BOTOCORE_SERVICES), and of those services every API version
  but the newest, which is the one botocore loads when no version is asked for (the CPI
  never asks); `examples-1.json`, which only botocore's documentation reads;
- each installed package's own test suite (a `tests` or `test` directory inside a
  package: openstacksdk's alone is 14 MB);
- whole distributions that pip installs only because another one declares them, and that
  nothing the CPI runs imports (UNUSED_DISTRIBUTIONS: the files their RECORD lists, scripts
  in the venv's bin/ included, and their .dist-info). The venv then no longer passes
  `pip check` (the packaging script runs it before).

tests/release/test_lean.py checks that every AWS operation the code calls is still in the
data this leaves, that every service the code makes a client for is kept, and that
importing the CPI's modules and its clouds' SDKs never reaches an unused distribution.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import sys
from pathlib import Path

# Every AWS service the CPI makes a botocore client for: cpi/clouds/aws/session.py
# (SERVICES: ec2, ebs, sts, elb, elbv2) and `cpi inspect` (iam, in cpi/clouds/aws/inspect.py).
BOTOCORE_SERVICES = ("ebs", "ec2", "elb", "elbv2", "iam", "sts")
# Files in a service's version directory that no client reads.
BOTOCORE_DOCS_ONLY = ("examples-1.json", "examples-1.json.gz")
# Names of a package's own test-suite directories.
TEST_DIRS = ("tests", "test")
# Distribution -> the top-level modules it installs: the CPI never imports them.
UNUSED_DISTRIBUTIONS = {
    # pbr declares setuptools to build packages with; at run time it reads versions through
    # importlib.metadata. setuptools' .pth file also imported _distutils_hack at every start.
    "setuptools": ("setuptools", "pkg_resources", "_distutils_hack"),
    # rich declares these for syntax highlighting, tracebacks and Markdown (rich.syntax,
    # rich.traceback, rich.markdown); the CLI draws tables, text and progress bars only.
    "pygments": ("pygments",),
    "markdown-it-py": ("markdown_it",),
    "mdurl": ("mdurl",),
    # The CPI calls AWS through botocore alone (cpi/clouds/aws/session.py).
    "boto3": ("boto3",),
    "s3transfer": ("s3transfer",),
}


def botocore_removals(data_dir: Path, keep: tuple[str, ...] = BOTOCORE_SERVICES) -> list[Path]:
    """What to remove under botocore/data: other services' directories, older API versions
    of the kept ones, and documentation-only files. The top-level tables (endpoints.json,
    partitions.json, _retry.json, sdk-default-configuration.json) stay."""
    removals = []
    for entry in sorted(data_dir.iterdir()):
        if not entry.is_dir() or entry.is_symlink():
            continue
        if entry.name not in keep:
            removals.append(entry)
            continue
        # botocore's Loader takes the greatest version directory name (they are ISO dates)
        versions = sorted(v for v in entry.iterdir() if v.is_dir() and not v.is_symlink())
        removals += versions[:-1]
        if versions:
            removals += [versions[-1] / name for name in BOTOCORE_DOCS_ONLY if (versions[-1] / name).exists()]
    return removals


def suite_removals(site_packages: Path) -> list[Path]:
    """Test-suite directories inside installed packages (site-packages/<pkg>/**/tests), never
    a top-level module or anything in *.dist-info."""
    removals = []
    for top in sorted(site_packages.iterdir()):
        if not top.is_dir() or top.is_symlink() or top.name.endswith((".dist-info", ".data", "__pycache__")):
            continue
        for directory, subdirs, _ in os.walk(top):
            for name in sorted(subdirs):
                if name in TEST_DIRS:
                    removals.append(Path(directory) / name)
            subdirs[:] = [name for name in subdirs if name not in TEST_DIRS]
    return removals


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _environment_root(site_packages: Path) -> Path:
    """The venv holding <venv>/lib/python3.X/site-packages (RECORD reaches its bin/), or
    site-packages itself when it is laid out otherwise."""
    site_packages = site_packages.resolve()
    return site_packages.parents[2] if site_packages.parent.parent.name == "lib" else site_packages


def distribution_removals(site_packages: Path, unused: dict[str, tuple[str, ...]] = UNUSED_DISTRIBUTIONS
                          ) -> list[Path]:
    """For each installed distribution of `unused`: every file its RECORD lists (those
    inside the venv), its modules' directories (with byte code RECORD does not list), and
    its .dist-info."""
    wanted = {_normalized(name): modules for name, modules in unused.items()}
    root = _environment_root(site_packages)
    found: list[Path] = []
    for info in sorted(site_packages.glob("*.dist-info")):
        modules = wanted.get(_normalized(info.name[: -len(".dist-info")].rsplit("-", 1)[0]))
        if modules is None:
            continue
        tops = [site_packages / m for m in modules if (site_packages / m).is_dir()]
        record = info / "RECORD"
        rows = list(csv.reader(record.read_text().splitlines())) if record.is_file() else []
        for row in rows:
            path = Path(os.path.normpath(site_packages / row[0])) if row and row[0] else None
            if path is None or not path.resolve().is_relative_to(root):
                continue
            if any(path.is_relative_to(p) for p in (info, *tops)):
                continue
            if path.is_file() or path.is_symlink():
                found.append(path)
        found += [*tops, info]
    return found


def removals(site_packages: Path) -> list[Path]:
    found = distribution_removals(site_packages)
    found += [path for path in suite_removals(site_packages) if not any(path.is_relative_to(f) for f in found)]
    data = site_packages / "botocore" / "data"
    if data.is_dir():
        found += botocore_removals(data)
    return found


def size(path: Path) -> tuple[int, int]:
    """(files, bytes) under `path` (a file or a directory), links not followed."""
    if path.is_symlink() or not path.is_dir():
        return 1, path.lstat().st_size
    files = total = 0
    for directory, _, names in os.walk(path):
        for name in names:
            files += 1
            total += os.lstat(os.path.join(directory, name)).st_size
    return files, total


def strip(site_packages: Path) -> tuple[int, int]:
    """Remove what `removals` lists; return (files, bytes) removed."""
    files = total = 0
    for path in removals(site_packages):
        if not (path.exists() or path.is_symlink()):
            continue
        count, nbytes = size(path)
        files, total = files + count, total + nbytes
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
            _remove_empty_parents(path.parent, site_packages)
    return files, total


def _remove_empty_parents(directory: Path, site_packages: Path) -> None:
    """A module file's directory (and its __pycache__) once nothing else is left in it."""
    while directory != site_packages and directory.is_relative_to(site_packages) and directory.is_dir():
        left = list(directory.iterdir())
        if left and [p.name for p in left] != ["__pycache__"]:
            return
        shutil.rmtree(directory)
        directory = directory.parent


def check() -> list[str]:
    """Make a client of every kept service with the botocore this interpreter imports, as
    the CPI would (offline: nothing is sent); return the problems."""
    for name in [name for name in os.environ if name.startswith("AWS_")]:
        del os.environ[name]  # an operator's AWS_PROFILE or AWS_DATA_PATH is not the CPI's
    try:
        import botocore.session
    except ImportError as exc:
        return [f"botocore does not import: {exc}"]
    problems = []
    session = botocore.session.Session()
    for service in BOTOCORE_SERVICES:
        try:
            session.create_client(service, region_name="us-east-1", aws_access_key_id="check",
                                  aws_secret_access_key="check")  # nosec B106  # a placeholder, never sent
        except Exception as exc:  # noqa: BLE001 - each service is reported
            problems.append(f"{service}: {type(exc).__name__}: {exc}")
    return problems


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        problems = check()
        for problem in problems:
            print(f"package cpi: botocore cannot make a client: {problem}", file=sys.stderr)
        return 1 if problems else 0
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: lean.py SITE_PACKAGES (the directory pip installed into) | lean.py --check", file=sys.stderr)
        return 2
    files, total = strip(Path(argv[0]))
    print(f"package cpi: left out {files} files ({total / 1e6:.1f} MB) the CPI never reads: "
          f"botocore data of other services and older API versions, packages' test suites, "
          f"{', '.join(UNUSED_DISTRIBUTIONS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
