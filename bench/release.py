"""What `bosh create-env` installs from this release, and how long CPython's compile takes.

Builds the release from a copy of the project (real wheels for this machine, a real
CPython source tarball), then compiles its packages the way tests/release does: each
package archive unpacked into a compile directory and `bash -x packaging` run there with
the variables create-env sets, into <root>/packages/<pkg>. Prints, per package, the wall
time of its packaging script and its installed size (bytes of the files, and the disk
blocks `du` counts), then the total, beside issue #12's goals (<= 120 MB installed,
CPython's compile <= 3 minutes on 2 cores), with the machine and its load before and after.

    .venv/bin/python bench/release.py --python-source python3.11_3.11.2.orig.tar.gz [--runs N]

The source tarball is python.org's Python-3.X.Y.tgz or Debian's identical
python3.X_3.X.Y.orig.tar.gz; without --python-source the one in the checkout's
blobs/python3/ is used. Wheels come from the checkout's blobs/wheels/ when they hold this
machine's platform, else `cpi release vendor` downloads them (PyPI). --release-dir measures
another tree (e.g. `git archive HEAD | tar -x -C /tmp/head` for the figures before a change).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cpi.release.builder import build_release
from cpi.release.definition import load_definition
from cpi.release.vendor import (
    add_python_source,
    host_platform,
    python_source_version,
    read_requirements,
    vendor_wheels,
)
from tests.release.support import (
    compile_package,
    copy_project_release,
    fake_python_source,
    installed_size,
    read_member,
    unpack,
)

MB = 1_000_000
GOAL_TOTAL_MB = 120
GOAL_COMPILE_S = 180
PACKAGES = ("python3", "cpi")


def machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores{', ' + model if model else ''}, {platform.system()} {platform.machine()}"


def load() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load: " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def prepare(release_source: Path, python_source: Path, work: Path) -> Path:
    """A copy of the release at `release_source` with the CPython source and this machine's
    wheels as blobs."""
    version, _ = python_source_version(python_source)
    minor = ".".join(version.split(".")[:2])
    release = copy_project_release(work / "release", python=minor, source=release_source)
    definition = load_definition(release)
    add_python_source(release, definition, python_source)
    wheels = ROOT / "blobs" / definition.vendor.wheels_dir
    requirements = wheels / "requirements.txt"
    platform_name = host_platform()
    if requirements.is_file():
        state = read_requirements(requirements)
        if state.python == minor and platform_name in state.platforms and (wheels / platform_name).is_dir():
            shutil.copytree(wheels, release / definition.vendor.blobs_root / definition.vendor.wheels_dir)
            print(f"wheels: the checkout's blobs/{definition.vendor.wheels_dir}/ ({platform_name}, CPython {minor})")
            return release
    print(f"wheels: downloading for {platform_name}, CPython {minor} (cpi release vendor) ...", flush=True)
    vendor_wheels(release, definition, [platform_name], python=minor)
    return release


def compile_once(tarball: Path, root: Path, timeout: float, standin: bool = False) -> dict[str, dict]:
    """Both packages compiled from `tarball` into root/packages, in dependency order; with
    `standin`, package python3 is a virtualenv of this interpreter instead (as tests/release
    does), and only package cpi is compiled."""
    packages = root / "packages"
    results = {}
    for name in PACKAGES:
        if standin and name == "python3":
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(packages / name)], check=True)
            continue
        compile_dir = unpack(read_member(tarball, f"packages/{name}.tgz"), root / "compile" / name)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        result = compile_package(compile_dir, packages, name, timeout=timeout)
        elapsed = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        (root / f"{name}.log").write_text(result.stdout + result.stderr)
        if result.returncode != 0:
            sys.exit(f"package {name}: packaging failed (exit {result.returncode}); log: {root / f'{name}.log'}\n"
                     + result.stderr[-3000:])
        apparent, blocks, files = installed_size(packages / name)
        results[name] = {"seconds": elapsed, "cpu": cpu, "apparent": apparent, "blocks": blocks, "files": files}
        phases = re.search(r"package python3: (configure .*)", result.stdout)
        if phases:
            results[name]["phases"] = phases.group(1)
    return results


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python-source", type=Path, help="CPython source tarball (default: blobs/python3/Python-*)")
    parser.add_argument("--release-dir", type=Path, default=ROOT, help="the tree to measure (default: this checkout)")
    parser.add_argument("--runs", type=int, default=1, help="compiles to take the median of (each takes minutes)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds allowed to one packaging script")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (installed packages, logs)")
    parser.add_argument("--standin-python3", action="store_true",
                        help="no CPython compile: package python3 is a venv of this interpreter (for an installation "
                             "to run bench/calls.py --release on; its python3 figures are then not measured)")
    args = parser.parse_args()

    source = args.python_source
    work = Path(tempfile.mkdtemp(prefix="cpi-bench-release-"))
    if args.standin_python3:
        minor = "{}.{}".format(*sys.version_info[:2])
        source = fake_python_source(work / f"Python-{minor}.99.tgz", f"{minor}.99")
    if source is None:
        found = sorted((ROOT / "blobs/python3").glob("Python-*"))
        if len(found) != 1:
            parser.error("no --python-source and not exactly one blobs/python3/Python-* in the checkout")
        source = found[0]
    try:
        print(f"machine: {machine()}")
        print(f"load before: {load()}")
        release = prepare(args.release_dir.resolve(), source.resolve(), work)
        first = build_release(release, work / "out1")
        second = build_release(release, work / "out2")
        deterministic = digest(first.tarball) == digest(second.tarball)
        print(f"release: {first.tarball.name}, {first.size / MB:.1f} MB, "
              f"two builds byte-identical: {'yes' if deterministic else 'NO'}")
        runs = []
        for run in range(args.runs):
            print(f"compile {run + 1}/{args.runs} ...", flush=True)
            runs.append(compile_once(first.tarball, work / f"run{run}", args.timeout, args.standin_python3))
        print(f"load after: {load()}")
        if args.standin_python3:
            cpi = runs[-1]["cpi"]
            print(f"package cpi: {cpi['seconds']:.1f} s wall, {cpi['apparent'] / MB:.1f} MB installed "
                  f"(python3: a stand-in venv, not measured)")
            if args.keep:
                print(f"kept: {work}; the installation: {work / 'run0'}")
            return 0
        print()
        print(f"{'package':<9} {'wall s (median)':>15} {'min..max':>15} {'CPU s':>7} "
              f"{'installed MB':>12} {'du MB':>7} {'files':>6}")
        total_apparent = total_blocks = 0
        for name in PACKAGES:
            seconds = [r[name]["seconds"] for r in runs]
            cpu = statistics.median(r[name]["cpu"] for r in runs)
            last = runs[-1][name]
            total_apparent += last["apparent"]
            total_blocks += last["blocks"]
            print(f"{name:<9} {statistics.median(seconds):>15.1f} {min(seconds):>7.1f}..{max(seconds):<7.1f} "
                  f"{cpu:>7.1f} {last['apparent'] / MB:>12.1f} {last['blocks'] / MB:>7.1f} {last['files']:>6}")
        print(f"{'total':<9} {'':>15} {'':>15} {'':>7} {total_apparent / MB:>12.1f} {total_blocks / MB:>7.1f}")
        for number, run in enumerate(runs, 1):
            if "phases" in run["python3"]:
                print(f"python3 run {number}: {run['python3']['phases']}")
        print()
        compile_s = statistics.median(r["python3"]["seconds"] for r in runs)
        compile_cpu = statistics.median(r["python3"]["cpu"] for r in runs)
        for label, size in (("installed (files' bytes)", total_apparent), ("on disk (du)", total_blocks)):
            mb = size / MB
            print(f"goal: {label} <= {GOAL_TOTAL_MB} MB: {mb:.1f} MB "
                  f"({'met' if mb <= GOAL_TOTAL_MB else f'NOT met, by {mb - GOAL_TOTAL_MB:.1f} MB'})")
        verdict = "met" if compile_s <= GOAL_COMPILE_S else f"NOT met, by {compile_s - GOAL_COMPILE_S:.1f} s"
        print(f"goal: CPython compile <= {GOAL_COMPILE_S} s on 2 cores: {compile_s:.1f} s wall on "
              f"{os.cpu_count()} cores ({verdict}); {compile_cpu:.1f} CPU s, i.e. {compile_cpu / 2:.1f} s "
              f"if 2 idle cores shared it perfectly")
        print("(MB = 10^6 bytes. The compile is the whole python3 packaging script: configure, make, "
              "install, strip. Wall time grows with the machine's load: see the load lines.)")
        if args.keep:
            print(f"kept: {work}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
