"""The packages' packaging scripts, run as a compile host runs them, and the installed job
answering CPI calls.

A simulated compile: the package archive from a real build is unpacked into a compile
directory and `bash -x packaging` runs there with the variables create-env sets
(BOSH_COMPILE_TARGET, BOSH_INSTALL_TARGET, BOSH_PACKAGE_NAME, BOSH_PACKAGES_DIR) plus some
hostile ones an operator's shell may have (PIP_INDEX_URL, PYTHONPATH). Package python3 is
stood in for by a virtualenv of the interpreter running the tests (compiling CPython takes
minutes); its own script is exercised with a fake CPython source tree instead. The
installed layout is create-env's: <root>/packages/<pkg>, <root>/jobs/cpi.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from cpi.release import lean
from cpi.release.builder import build_release
from cpi.release.vendor import host_platform, requirements_text
from tests.release.support import (
    DIRECTOR_PATH,
    FAKE_STDLIB_KEPT,
    HOST_PYTHON,
    REPO,
    alias_spec,
    compile_package,
    fake_python_source,
    read_member,
    render_job,
    unpack,
    write,
)


def standin_python3(packages_dir: Path) -> Path:
    """packages/python3 as a virtualenv of this interpreter: bin/python3 is what the cpi
    package's script builds its venv from."""
    target = packages_dir / "python3"
    if not (target / "bin/python3").exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True, timeout=120)
    return target


# --- package python3 ---------------------------------------------------------------------------


def python3_compile_dir(tmp_path: Path, versions: list[str], **fake) -> Path:
    compile_dir = tmp_path / "compile/python3"
    write(compile_dir / "packaging", (REPO / "packages/python3/packaging").read_text())
    for version in versions:
        fake_python_source(compile_dir / "python3" / f"Python-{version}.tgz", version, **fake)
    return compile_dir


@pytest.fixture(scope="module")
def fake_python3(tmp_path_factory):
    """Package python3 compiled from a fake CPython source: (compile dir, packages dir, result)."""
    tmp_path = tmp_path_factory.mktemp("python3")
    compile_dir = python3_compile_dir(tmp_path, [f"{HOST_PYTHON}.99"])
    packages = tmp_path / "installation/packages"
    result = compile_package(compile_dir, packages, "python3")
    assert result.returncode == 0, result.stderr[-3000:]
    return compile_dir, packages, result


def test_python3_packaging_configures_builds_and_installs_into_the_target(fake_python3):
    compile_dir, packages, result = fake_python3
    args = (packages / "python3/configure.args").read_text().splitlines()
    assert f"--prefix={packages / 'python3'}" in args
    assert (compile_dir / f"build/Python-{HOST_PYTHON}.99/built.txt").exists()  # `make` ran
    assert "package python3: CPython" in result.stdout
    check = subprocess.run([str(packages / "python3/bin/python3"), "-c", "import ssl, zlib"], capture_output=True)
    assert check.returncode == 0


def test_python3_is_compiled_lean_and_quick(fake_python3):
    """No PGO, every core, no debug info, no pip, no test modules (issue #12)."""
    compile_dir, packages, result = fake_python3
    args = (packages / "python3/configure.args").read_text().splitlines()
    assert "--enable-optimizations" not in args and not any(a.startswith("--with-lto") for a in args)
    assert "--with-ensurepip=no" in args
    assert "--disable-test-modules" in args
    (opt,) = [a.removeprefix("OPT=").split() for a in args if a.startswith("OPT=")]
    assert "-g" not in opt and "-fwrapv" in opt
    assert "py_cv_module__tkinter=n/a" in args
    makeflags = (compile_dir / f"build/Python-{HOST_PYTHON}.99/makeflags.txt").read_text().split()
    assert f"-j{len(os.sched_getaffinity(0))}" in makeflags
    assert re.search(r"package python3: configure \d+ s, make \d+ s, install \d+ s, strip \d+ s", result.stdout)


def test_python3_packaging_strips_what_the_cpi_never_imports(fake_python3):
    _, packages, _ = fake_python3
    lib = packages / f"python3/lib/python{HOST_PYTHON}"
    kept = {f.format(minor=HOST_PYTHON) for f in FAKE_STDLIB_KEPT}
    left = {str(p.relative_to(lib)) for p in lib.rglob("*") if p.is_file()}
    assert left == kept, f"stripped too much: {sorted(kept - left)}; left: {sorted(left - kept)}"
    for directory in ("test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data", "unittest/test",
                      "turtledemo/__pycache__"):
        assert not (lib / directory).exists(), directory
    assert not (packages / f"python3/lib/libpython{HOST_PYTHON}.a").exists()
    assert (packages / "python3/lib/pkgconfig/python3.pc").exists()
    bins = sorted(p.name for p in (packages / "python3/bin").iterdir())
    assert bins == sorted(["python3", f"pydoc{HOST_PYTHON}"])


def test_python3_packaging_needs_one_library_directory(tmp_path):
    configure = "#!/bin/sh\nprintf 'all:\\n\\ttrue\\ninstall:\\n\\ttrue\\n' > Makefile\n"
    compile_dir = python3_compile_dir(tmp_path, [f"{HOST_PYTHON}.99"], configure=configure)
    result = compile_package(compile_dir, tmp_path / "packages", "python3")
    assert result.returncode != 0
    assert "expected one lib/python3.*/ under" in result.stderr


@pytest.mark.parametrize("versions, message", [([], "found 0: none"), (["3.11.1", "3.11.2"], "found 2:")])
def test_python3_packaging_needs_exactly_one_source(tmp_path, versions, message):
    compile_dir = python3_compile_dir(tmp_path, versions)
    result = compile_package(compile_dir, tmp_path / "packages", "python3")
    assert result.returncode != 0
    assert "expected exactly one CPython source tarball python3/Python-3.*" in result.stderr
    assert message in result.stderr


def test_python3_packaging_rejects_a_tarball_without_configure(tmp_path):
    compile_dir = python3_compile_dir(tmp_path, [])
    readme = write(tmp_path / "README", "not CPython")
    (compile_dir / "python3").mkdir()
    with tarfile.open(compile_dir / "python3/Python-3.11.2.tgz", "w:gz") as tar:
        tar.add(readme, arcname="Python-3.11.2/README")
    result = compile_package(compile_dir, tmp_path / "packages", "python3")
    assert result.returncode != 0
    assert "does not unpack to one Python-3.x.y/ directory with a configure script" in result.stderr


# --- package cpi: failures that must be clear ----------------------------------------------------


def cpi_compile_dir(tmp_path: Path, *, python: str = HOST_PYTHON, platforms: list[str] | None = None) -> Path:
    compile_dir = tmp_path / "compile/cpi"
    write(compile_dir / "packaging", (REPO / "packages/cpi/packaging").read_text())
    platforms = ["linux-riscv64"] if platforms is None else platforms
    write(compile_dir / "wheels/requirements.txt", requirements_text(["pydantic>=2"], python, platforms))
    write(compile_dir / "cpi/__init__.py", "")
    return compile_dir


def test_cpi_packaging_names_the_missing_platform(tmp_path):
    packages = tmp_path / "installation/packages"
    standin_python3(packages)
    result = compile_package(cpi_compile_dir(tmp_path, platforms=["linux-riscv64", "macos-arm64"]), packages, "cpi")
    assert result.returncode != 0
    assert f"package cpi: no wheels for this compile host ({host_platform()})" in result.stderr
    assert "the release has wheels for: linux-riscv64 macos-arm64" in result.stderr
    assert f"cpi release vendor --platform {host_platform()}" in result.stderr


def test_cpi_packaging_finds_python3_beside_it_when_a_bosh_agent_compiles(tmp_path):
    """A bosh-agent sets no BOSH_PACKAGES_DIR and installs each package at <packages
    dir>/<name>, which is /var/vcap/packages only on a stemcell: on the agent's dummy
    platform (a local-cloud VM with a real bosh-agent) python3 is found beside the target."""
    packages = tmp_path / "vm-1/packages"
    standin_python3(packages)
    result = compile_package(cpi_compile_dir(tmp_path), packages, "cpi", {"BOSH_PACKAGES_DIR": None})
    assert "no interpreter" not in result.stderr
    assert f"package cpi: no wheels for this compile host ({host_platform()})" in result.stderr  # got past it


def test_cpi_packaging_refuses_wheels_for_another_python(tmp_path):
    packages = tmp_path / "installation/packages"
    standin_python3(packages)
    compile_dir = cpi_compile_dir(tmp_path, python="3.99", platforms=[host_platform()])
    (compile_dir / "wheels" / host_platform()).mkdir()
    result = compile_package(compile_dir, packages, "cpi")
    assert result.returncode != 0
    assert f"the wheels were vendored for CPython 3.99 but package python3 is CPython {HOST_PYTHON}" in result.stderr


def test_cpi_packaging_needs_package_python3(tmp_path):
    result = compile_package(cpi_compile_dir(tmp_path), tmp_path / "installation/packages", "cpi")
    assert result.returncode != 0
    assert "python3/bin/python3 (is package python3 compiled?)" in result.stderr


# --- package cpi for real, then the job ------------------------------------------------------------


@pytest.fixture(scope="module")
def real_release(host_wheels, tmp_path_factory):
    """The release built with this machine's real wheels (and a stand-in CPython source)."""
    release = host_wheels.parent
    fake_python_source(release / "blobs/python3" / f"Python-{HOST_PYTHON}.99.tgz", f"{HOST_PYTHON}.99")
    return release, build_release(release, tmp_path_factory.mktemp("built") / "out")


def test_cpi_packaging_runs_nothing_from_a_tampered_pip_wheel(real_release, tmp_path):
    """A pip wheel changed inside the package (same name, code that would write a marker as
    soon as pip starts): the script checks every vendored file's sha256 with package
    python3 first, names the file and stops before pip, or anything else, runs."""
    _, built = real_release
    compile_dir = unpack(read_member(built.tarball, "packages/cpi.tgz"), tmp_path / "compile/cpi")
    (wheel,) = (compile_dir / "wheels/any").glob("pip-*.whl")
    marker = tmp_path / "pip-ran"
    original = wheel.read_bytes()
    with zipfile.ZipFile(io.BytesIO(original)) as source, zipfile.ZipFile(wheel, "w") as tampered:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "pip/__main__.py":
                data = f"open({str(marker)!r}, 'w').write('ran')\n".encode() + data
            tampered.writestr(item, data)
    packages = tmp_path / "installation/packages"
    standin_python3(packages)
    result = compile_package(compile_dir, packages, "cpi")
    assert result.returncode != 0
    assert f"package cpi: {Path('wheels/any') / wheel.name}: sha256 " in result.stderr, result.stderr[-3000:]
    assert f"but SHA256SUMS has {hashlib.sha256(original).hexdigest()}" in result.stderr
    assert "nothing of them ran" in result.stderr
    assert not marker.exists(), "code of the tampered pip wheel ran"
    assert not (packages / "cpi/venv").exists()


@pytest.fixture(scope="module")
def installation(real_release, tmp_path_factory):
    """Package cpi of the real release compiled from its archive into <root>/packages/cpi
    against a stand-in python3, as create-env would."""
    release, built = real_release
    work = tmp_path_factory.mktemp("installation")
    root = work / "root"
    packages = root / "packages"
    standin_python3(packages)
    compile_dir = unpack(read_member(built.tarball, "packages/cpi.tgz"), work / "compile/cpi")
    # An operator's shell may point pip and Python elsewhere: the script must not care.
    hostile = {
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        "PIP_FIND_LINKS": str(work / "nowhere"),
        "PYTHONPATH": str(work / "nowhere"),
        "PIP_REQUIRE_HASHES": "1",
    }
    result = compile_package(compile_dir, packages, "cpi", hostile)
    assert result.returncode == 0, f"packaging failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return {"root": root, "release": release, "tarball": built.tarball, "log": result.stdout + result.stderr}


@pytest.mark.slow
def test_cpi_package_installs_the_runtime_offline(installation):
    venv_python = installation["root"] / "packages/cpi/venv/bin/python"
    probe = subprocess.run(
        [
            str(venv_python),
            "-I",
            "-c",
            ("import json, cpi, pydantic_core, pydantic, tenacity, botocore.session, openstack.connection, yaml, "
             "rich.console; print(json.dumps(cpi.__path__[0]))"),
        ],
        capture_output=True,
        text=True,
        env={"PATH": DIRECTOR_PATH},
        cwd="/",
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout) == str(installation["root"] / "packages/cpi/app/cpi")
    assert (
        f"package cpi: installed in {installation['root'] / 'packages/cpi'} for {host_platform()}"
        in installation["log"]
    )


@pytest.mark.slow
def test_the_installed_release_holds_exactly_the_locked_versions(installation):
    """What a compile host installs is what requirements.lock pins (and what .venv runs):
    every distribution in the package's venv at its locked version."""
    from cpi.release.lock import by_version, canonical, read

    (site,) = (installation["root"] / "packages/cpi/venv").glob("lib/python3.*/site-packages")
    installed = set()
    for info in site.glob("*.dist-info"):
        metadata = (info / "METADATA").read_text(errors="replace").split("\n\n", 1)[0].splitlines()
        fields = dict(line.split(": ", 1) for line in metadata if ": " in line)
        installed.add((canonical(fields["Name"]), fields["Version"]))
    locked = set(by_version(read(REPO)))
    assert installed, "no distribution found in the package's venv"
    assert installed <= locked, f"installed at versions the lock does not pin: {sorted(installed - locked)}"
    assert {name for name, _ in installed} >= {"pydantic", "pydantic-core", "botocore", "openstacksdk", "redis"}


@pytest.mark.slow
def test_cpi_package_leaves_out_what_the_cpi_never_reads(installation):
    venv = installation["root"] / "packages/cpi/venv"
    (site,) = venv.glob("lib/python3.*/site-packages")
    for absent in ("pip", "setuptools", "pygments", "boto3", "openstack/tests", "botocore/data/s3",
                   "distutils-precedence.pth"):
        assert not (site / absent).exists(), absent
    assert not list(site.glob("pip-*.dist-info")) and not (venv / "bin/pip").exists()
    assert sorted(p.name for p in (site / "botocore/data").iterdir() if p.is_dir()) == sorted(lean.BOTOCORE_SERVICES)
    assert "package cpi: left out " in installation["log"]
    byte_code = list(site.glob("botocore/__pycache__/*.cpython-*.pyc"))
    assert byte_code and not list(site.glob("**/*.opt-1.pyc")), "site-packages byte-compiled once, after the strip"


@pytest.mark.slow
def test_cpi_package_code_is_byte_compiled(installation):
    app = installation["root"] / "packages/cpi/app/cpi"
    assert list(app.glob("__pycache__/*.pyc")), "the app code was not byte-compiled at packaging time"


@pytest.fixture(scope="module")
def job(installation, ruby, tmp_path_factory):
    """Job cpi rendered into <root>/jobs/cpi for the local cloud, as create-env renders it."""
    root = installation["root"]
    scratch = tmp_path_factory.mktemp("render")
    properties = {
        "cloud": {"plugin": "local"},
        "local": {"state_dir": str(root / "state")},
        "agent": {"mbus": "nats://nats:secret@127.0.0.1:4222"},
        "ntp": ["time1.example"],
        # the installed job's warm helper serves these calls, then exits soon after: nothing
        # of the tests lingers (the default is 600 s)
        "helper": {"idle_timeout": 5},
    }
    render_job(root / "jobs/cpi", properties, scratch, ruby)
    return root


def call(root: Path, method: str, *arguments, env: dict | None = None, job: str = "cpi"):
    request = {
        "method": method,
        "arguments": list(arguments),
        "context": {"director_uuid": "release-test"},
        "api_version": 2,
    }
    result = subprocess.run(
        [str(root / "jobs" / job / "bin/cpi")],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        # the director's environment, with the run's HOME (tests/support/suite.py): the wrapper
        # would take root's real home from the password database, and the calls' warm helper,
        # audit trail and throttle state with it
        env=env or {"PATH": DIRECTOR_PATH, "HOME": os.environ["HOME"]},
        cwd="/",
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    response = json.loads(result.stdout)
    assert response["error"] is None, f"{method}: {response['error']}\n{response['log']}"
    return response["result"]


@pytest.mark.slow
def test_installed_job_answers_info_in_the_directors_environment(job):
    info = call(job, "info", env={"PATH": DIRECTOR_PATH})  # no HOME at all (info writes nothing)
    assert "stemcell_formats" in info
    assert info.get("api_version", 1) >= 1


@pytest.mark.slow
def test_installed_job_answers_info_under_create_env(job, tmp_path):
    env = {
        "PATH": DIRECTOR_PATH,
        "HOME": str(tmp_path),
        "BOSH_PACKAGES_DIR": str(job / "packages"),
        "BOSH_JOBS_DIR": str(job / "jobs"),
    }
    assert "stemcell_formats" in call(job, "info", env=env)


@pytest.mark.slow
def test_installed_job_runs_a_local_cloud_lifecycle(job, tmp_path):
    image = write(tmp_path / "image", os.urandom(4096))
    stemcell = call(job, "create_stemcell", str(image), {"name": "bosh-dummy-stemcell", "version": "1"})
    networks = {
        "default": {
            "type": "manual",
            "ip": "10.244.0.2",
            "netmask": "255.255.255.0",
            "gateway": "10.244.0.1",
            "dns": ["10.244.0.1"],
            "default": ["dns", "gateway"],
        }
    }
    vm_cid, _ = call(job, "create_vm", "agent-release-test", stemcell, {"cpu": 1, "ram": 256}, networks, [], {})
    assert call(job, "has_vm", vm_cid) is True
    disk = call(job, "create_disk", 64, {}, vm_cid)
    assert call(job, "has_disk", disk) is True
    call(job, "attach_disk", vm_cid, disk)
    call(job, "detach_disk", vm_cid, disk)
    call(job, "delete_disk", disk)
    call(job, "delete_vm", vm_cid)
    assert call(job, "has_vm", vm_cid) is False
    call(job, "delete_stemcell", stemcell)
    state = job / "state"
    leftovers = {kind.name: sorted(p.name for p in kind.iterdir()) for kind in state.iterdir() if kind.is_dir()}
    assert not any(leftovers.get(kind) for kind in ("stemcells", "vms", "disks")), leftovers


def interpreter_argv(argv: list[str], env: dict) -> list[str]:
    """The command line of the Python process `argv` becomes (bin/cpi and the wrapper exec
    it: the same pid), read from /proc while it waits for its request, which then never
    comes (an empty stdin gets its error response)."""
    import time

    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd="/")
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                words = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[:-1]
            except OSError:
                words = []
            if b"-c" in words:
                return [word.decode() for word in words]
            assert proc.poll() is None and time.monotonic() < deadline, f"{argv} never started Python"
            time.sleep(0.01)
    finally:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and json.loads(out)["error"]["message"].startswith("Must provide valid JSON"), err


@pytest.mark.slow
def test_installed_job_starts_the_interpreter_as_bin_cpi_does(job, tmp_path):
    """What operators run takes the start-up path that the tests and bench/calls.py measure
    on a checkout's bin/cpi (-I -S, cpi.entry; issue #21): the job's wrapper runs the
    package's copy of that very file."""
    from tests.support.runner import BIN_CPI, COLD_ENV

    app = job / "packages/cpi/app"
    assert (app / "bin/cpi").read_bytes() == BIN_CPI.read_bytes()
    config = write(tmp_path / "cpi.json", "{}")
    shipped = interpreter_argv([str(job / "jobs/cpi/bin/cpi")], {"PATH": DIRECTOR_PATH, "HOME": os.environ["HOME"]})
    checkout = interpreter_argv([str(BIN_CPI), str(config)], COLD_ENV)
    assert shipped[0] == str(job / "packages/cpi/venv/bin/python")
    assert shipped[1:5] == checkout[1:5] and shipped[1:3] == ["-I", "-S"], (shipped, checkout)
    assert shipped[5:] == [str(app), str(job / "jobs/cpi/config/cpi.json")]
    assert checkout[5:] == [str(REPO), str(config)]


@pytest.fixture(scope="module")
def moto_account(tmp_path_factory):
    from tests.aws import moto_env

    server = moto_env.MotoServer(tmp_path_factory.mktemp("moto") / "moto_server.log")
    try:
        yield moto_env.seed(server.url)
    finally:
        server.stop()


@pytest.mark.slow
def test_installed_aws_cpi_job_keeps_its_audit_trail_on_the_persistent_disk_and_the_operator_sees_it(
        installation, ruby, moto_account, tmp_path):
    """Day two on a director (#32): job aws_cpi as the agent lays it out on a VM, beside
    store/ (the persistent disk), on the compiled package. bin/pre-start makes the job's
    directory there; the director's calls (bin/cpi, wiped environment) keep their audit trail
    in it, not under the user's home, which a recreated VM loses; bin/cpi-operator, with the
    job's own cpi.json, lists the disk they made and shows their audit lines."""
    root = installation["root"]
    aws = moto_account.config()["cloud"]["properties"]["aws"]
    properties = {"aws": aws, "agent": {"mbus": "nats://nats:secret@127.0.0.1:4222"}, "helper": {"idle_timeout": 5}}
    render_job(root / "jobs/aws_cpi", properties, tmp_path, ruby, alias_spec("aws_cpi"))
    started = subprocess.run([str(root / "jobs/aws_cpi/bin/pre-start")], capture_output=True, text=True, timeout=60)
    assert started.returncode == 0, started.stderr
    env = {"PATH": DIRECTOR_PATH, "HOME": os.environ["HOME"]}

    disk = call(root, "create_disk", 1024, {}, None, env=env, job="aws_cpi")
    try:
        trail = root / "store/aws_cpi/audit/audit.log"
        lines = [json.loads(line) for line in trail.read_text().splitlines()]
        assert [(line["action"], line["resource_id"]) for line in lines] == [("create", disk)]
        # nothing of this call in the home's trail (which the suite's other calls share: look for its disk)
        home_trail = Path(os.environ["HOME"]) / ".cache/bosh-cpi/audit"
        assert not any(disk in f.read_text() for f in home_trail.glob("*") if f.is_file())

        def operator(*args: str):
            result = subprocess.run([str(root / "jobs/aws_cpi/bin/cpi-operator"), *args, "--json"],
                                    capture_output=True, text=True, env=env, cwd="/", timeout=120)
            assert result.returncode == 0, result.stderr
            return result.stdout

        assert disk in [row["cid"] for row in json.loads(operator("list", "disks"))]
        shown = [json.loads(line) for line in operator("audit", "--resource", disk).splitlines()]
        assert [(line["action"], line["resource_id"]) for line in shown] == [("create", disk)]
    finally:
        call(root, "delete_disk", disk, env=env, job="aws_cpi")
