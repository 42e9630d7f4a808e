"""The real thing, on request: CPython compiled from a real source tarball by package
python3's script, then package cpi on it, as create-env does (minutes on 2 cores, so only
when CPI_TEST_PYTHON_SOURCE names the tarball, e.g. Debian's python3.11_3.11.2.orig.tar.gz
or python.org's Python-3.11.x.tgz, of this interpreter's minor version).

    CPI_TEST_PYTHON_SOURCE=~/python3.11_3.11.2.orig.tar.gz .venv/bin/python -m pytest tests/release/test_compile.py

bench/release.py measures the same build (sizes, compile time); this checks it works.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cpi.release.builder import build_release
from cpi.release.definition import load_definition
from cpi.release.vendor import add_python_source, python_source_version
from tests.release.support import (
    DIRECTOR_PATH,
    HOST_PYTHON,
    compile_package,
    copy_project_release,
    installed_size,
    read_member,
    unpack,
)

SOURCE = os.environ.get("CPI_TEST_PYTHON_SOURCE")
GOAL_MB = 120  # issue #12: what create-env installs from this release

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not SOURCE, reason="compiles CPython (minutes): set CPI_TEST_PYTHON_SOURCE to a CPython source tarball"
    ),
]


@pytest.fixture(scope="module")
def compiled(host_wheels, tmp_path_factory):
    source = Path(SOURCE).expanduser()
    version, _ = python_source_version(source)
    if not version.startswith(HOST_PYTHON + "."):
        pytest.skip(f"{source} is CPython {version}: the vendored wheels are for this interpreter's {HOST_PYTHON}")
    work = tmp_path_factory.mktemp("compile")
    release = copy_project_release(work / "release")
    shutil.copytree(host_wheels / "wheels", release / "blobs/wheels")
    add_python_source(release, load_definition(release), source)
    built = build_release(release, work / "out")
    packages = work / "root/packages"
    logs = {}
    for name in ("python3", "cpi"):
        compile_dir = unpack(read_member(built.tarball, f"packages/{name}.tgz"), work / "compile" / name)
        result = compile_package(compile_dir, packages, name, timeout=1800)
        logs[name] = result.stdout + result.stderr
        assert result.returncode == 0, f"package {name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return packages, logs


def run(python: Path, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-I", "-c", code], capture_output=True, text=True, cwd="/",
                          env={"PATH": DIRECTOR_PATH}, timeout=300)


def test_the_stripped_cpython_has_what_the_cpi_needs(compiled):
    packages, _ = compiled
    python = packages / "python3/bin/python3"
    result = run(python, "import ssl, zlib, hashlib, pyexpat, venv, json, decimal; print('ok')")
    assert result.returncode == 0, result.stderr
    lib = next((packages / "python3/lib").glob("python3.*"))
    for gone in ("test", "idlelib", "tkinter", "ensurepip", "lib2to3", "site-packages/pip"):
        assert not (lib / gone).exists(), gone
    assert not list((packages / "python3").rglob("libpython*.a")) and not list(lib.rglob("*.opt-1.pyc"))


def test_the_installed_cpi_imports_its_clouds(compiled):
    packages, logs = compiled
    result = run(packages / "cpi/venv/bin/python",
                 "import cpi.rpc, cpi.clouds.aws.cloud, cpi.clouds.openstack.cloud, botocore.session, "
                 "openstack.connection; print('ok')")
    assert result.returncode == 0, result.stderr
    assert "package cpi: left out " in logs["cpi"]


def test_what_create_env_installs_fits_the_goal(compiled):
    packages, _logs = compiled
    sizes = {name: installed_size(packages / name)[0] for name in ("python3", "cpi")}
    total = sum(sizes.values()) / 1e6
    detail = ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in sizes.items())
    assert total <= GOAL_MB, f"installed {total:.1f} MB ({detail}); goal {GOAL_MB} MB"
