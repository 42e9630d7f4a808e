"""Helpers shared by the release tests: synthetic release trees, a copy of this project's
own release with stand-in blobs, ERB rendering through Ruby, and tar inspection."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
RENDERER = Path(__file__).with_name("erb_render.rb")
JOB_DIR = REPO / "jobs" / "cpi"
HOST_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
DIRECTOR_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
PACKAGING_TIMEOUT = 600


def write(path: Path, text: str | bytes = "", mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    if mode is not None:
        path.chmod(mode)
    return path


def write_yaml(path: Path, data) -> Path:
    return write(path, yaml.safe_dump(data, sort_keys=False))


def minimal_release(root: Path, *, name: str = "demo", version: str = "1.2.3") -> Path:
    """A small release without vendoring: job `web` using packages `app` -> `runtime`,
    files in src/ and blobs/, a LICENSE and a NOTICE."""
    write_yaml(
        root / "release.yml",
        {
            "name": name,
            "version": version,
            "jobs": ["web"],
            "packages": ["app", "runtime"],
            "source_roots": ["src", "blobs"],
            "license": ["LICENSE*", "NOTICE*"],
        },
    )
    write_yaml(
        root / "jobs/web/spec",
        {
            "name": "web",
            "templates": {"ctl.erb": "bin/ctl", "config.json.erb": "config/config.json"},
            "packages": ["runtime", "app"],
            "properties": {"port": {"description": "Port", "default": 8080}},
        },
    )
    write(root / "jobs/web/monit", "")
    write(root / "jobs/web/templates/ctl.erb", "#!/bin/bash\necho <%= p('port') %>\n", 0o755)
    write(root / "jobs/web/templates/config.json.erb", '{"port": <%= p("port") %>}\n')
    write_yaml(
        root / "packages/app/spec",
        {"name": "app", "dependencies": ["runtime"], "files": ["app/**/*"], "excluded_files": ["app/**/*.pyc"]},
    )
    write(root / "packages/app/packaging", "cp -a app ${BOSH_INSTALL_TARGET}\n")
    write(root / "src/app/main.py", "print('hello')\n")
    write(root / "src/app/bin/run", "#!/bin/sh\nexec python3 main.py\n", 0o755)
    write(root / "src/app/main.pyc", b"\x00compiled")
    write_yaml(root / "packages/runtime/spec", {"name": "runtime", "files": ["runtime/runtime-*.tgz"]})
    write(root / "packages/runtime/packaging", "tar xzf runtime/runtime-*.tgz -C ${BOSH_INSTALL_TARGET}\n")
    write(root / "blobs/runtime/runtime-1.0.tgz", b"pretend this is a large tarball")
    write(root / "LICENSE", "Apache License 2.0\n")
    write(root / "NOTICE", "Copyright the authors\n")
    return root


# What the fake CPython's `make install` lays out under lib/python3.X/ (besides bin/python3):
# a small stand-in for the real tree, half of it what package python3 strips.
FAKE_STDLIB_KEPT = (
    "os.py",
    "json/__init__.py",
    "json/__pycache__/__init__.cpython-311.pyc",
    "venv/__init__.py",
    "lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so",
    "config-{minor}-x86_64-linux-gnu/Makefile",
    "site-packages/README.txt",
)
FAKE_STDLIB_STRIPPED = (
    "test/test_os.py",
    "idlelib/idle.py",
    "idlelib/idle_test/test_x.py",
    "tkinter/__init__.py",
    "turtledemo/__main__.py",
    "turtle.py",
    "ensurepip/_bundled/pip-22.3.1-py3-none-any.whl",
    "lib2to3/__init__.py",
    "pydoc_data/topics.py",
    "unittest/test/test_case.py",
    "json/__pycache__/__init__.cpython-311.opt-1.pyc",
    "json/__pycache__/__init__.cpython-311.opt-2.pyc",
    "turtledemo/__pycache__/__main__.cpython-311.pyc",
    "config-{minor}-x86_64-linux-gnu/libpython{minor}.a",
    "config-{minor}-x86_64-linux-gnu/python.o",
)


def fake_python_source(path: Path, version: str, *, configure: str | None = None) -> Path:
    """A gzip tarball shaped like CPython's source: Python-<version>/configure and a README.

    The default configure script writes a Makefile whose `all` records make's flags and whose
    `install` puts a bin/python3 that runs the interpreter running the tests, the files of
    FAKE_STDLIB_* under lib/python3.X/ (and bin/idle3, bin/2to3), and the arguments configure
    was given."""
    minor = ".".join(version.split(".")[:2])
    if configure is None:
        configure = (
            r"""#!/bin/sh
printf '%s\n' "$@" > configure.args
prefix=$(sed -n 's/^--prefix=//p' configure.args)
printf '#!/bin/sh\nexec %s "$@"\n' "PYTHON" > python3.wrapper
{
  printf 'all:\n\techo built > built.txt\n\techo "$(MAKEFLAGS)" > makeflags.txt\n'
  printf 'install:\n\tmkdir -p %s/bin\n\tcp python3.wrapper %s/bin/python3\n' "$prefix" "$prefix"
  printf '\tchmod 755 %s/bin/python3\n\tcp configure.args %s/configure.args\n' "$prefix" "$prefix"
  printf '\tsh lay-out.sh %s\n' "$prefix"
} > Makefile
"""
        ).replace("PYTHON", sys.executable)
    files = [f"lib/python{minor}/" + f.format(minor=minor) for f in (*FAKE_STDLIB_KEPT, *FAKE_STDLIB_STRIPPED)]
    files += ["bin/idle3", f"bin/idle{minor}", "bin/2to3", f"bin/2to3-{minor}", f"bin/pydoc{minor}"]
    files += [f"lib/libpython{minor}.a", "lib/pkgconfig/python3.pc"]
    lay_out = "".join(f'mkdir -p "$1/{os.path.dirname(f)}" && echo x > "$1/{f}"\n' for f in files)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, data, mode in (
            (f"Python-{version}/configure", configure.encode(), 0o755),
            (f"Python-{version}/lay-out.sh", lay_out.encode(), 0o644),
            (f"Python-{version}/README.rst", b"This is Python\n", 0o644),
        ):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return path


def fake_wheels(wheels_dir: Path, requirements: list[str], python: str, platforms: list[str]) -> None:
    """Stand-in wheel files (not installable) in the vendored layout, for build tests, added
    to the release's copy of the lock (requirements.lock and requirements.files), as the
    build accepts only locked files, and listed in SHA256SUMS as `cpi release vendor` does."""
    from cpi.release import checksums
    from cpi.release.lock import digest
    from cpi.release.vendor import requirements_text

    release_dir = wheels_dir.parent.parent
    stand_ins = {"any/pure_pkg-1.0-py3-none-any.whl": b"PK pure", "any/pip-99.0-py3-none-any.whl": b"PK pip"}
    for platform in platforms:
        stand_ins[f"{platform}/compiled_pkg-1.0-cp311-cp311-{platform}.whl"] = f"PK {platform}".encode()
    for name, data in stand_ins.items():
        sha256 = checksums.sha256_file(write(wheels_dir / name, data))
        project, version = name.split("/")[1].split("-")[:2]
        with open(release_dir / "requirements.lock", "a") as lock:
            lock.write(f"{project}=={version} --hash=sha256:{sha256}\n")
        with open(release_dir / "requirements.files", "a") as files:
            files.write(f"{sha256}  {name.split('/')[1]}\n")
    text = requirements_text(requirements, python, platforms, digest(release_dir))
    write(wheels_dir / "requirements.txt", text)
    checksums.write(wheels_dir)


def copy_project_release(destination: Path, *, python: str = HOST_PYTHON, source: Path = REPO) -> Path:
    """This project's release inputs (release.yml, jobs/, packages/, pyproject.toml, the lock
    and requirements.files, cpi/, bin/cpi, LICENSE) copied from `source` (default: this
    checkout) to `destination`, with vendor.python set to `python` and no blobs yet."""
    destination.mkdir(parents=True, exist_ok=True)
    for name in ("jobs", "packages"):
        shutil.copytree(source / name, destination / name)
    shutil.copytree(source / "cpi", destination / "cpi", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (destination / "bin").mkdir()
    shutil.copy(source / "bin" / "cpi", destination / "bin" / "cpi")
    shutil.copy(source / "pyproject.toml", destination / "pyproject.toml")
    for name in ("requirements.lock", "requirements.files"):
        shutil.copy(source / name, destination / name)
    for license_file in [*source.glob("LICENSE*"), *source.glob("NOTICE*")]:
        shutil.copy(license_file, destination / license_file.name)
    definition = yaml.safe_load((source / "release.yml").read_text())
    definition["vendor"]["python"] = python
    write_yaml(destination / "release.yml", definition)
    return destination


def add_fake_blobs(release_dir: Path, *, python: str = HOST_PYTHON) -> None:
    """Stand-in blobs for every platform of release.yml: enough to build, not to install."""
    from cpi.release.vendor import project_requirements

    definition = yaml.safe_load((release_dir / "release.yml").read_text())
    fake_python_source(release_dir / "blobs/python3" / f"Python-{python}.99.tgz", f"{python}.99")
    fake_wheels(
        release_dir / "blobs/wheels",
        project_requirements(release_dir),
        python,
        list(definition["vendor"]["platforms"]),
    )


def compile_package(
    compile_dir: Path, packages_dir: Path, name: str, extra_env: dict | None = None, timeout: float = PACKAGING_TIMEOUT
) -> subprocess.CompletedProcess:
    """A simulated compile: `bash -x packaging` in `compile_dir` (an unpacked package) with the
    variables create-env sets, installing into packages_dir/<name>; a None in `extra_env`
    unsets that variable (a bosh-agent sets no BOSH_PACKAGES_DIR)."""
    env = {
        "PATH": os.environ.get("PATH", DIRECTOR_PATH),
        "HOME": str(compile_dir.parent),
        "BOSH_COMPILE_TARGET": str(compile_dir),
        "BOSH_INSTALL_TARGET": str(packages_dir / name),
        "BOSH_PACKAGE_NAME": name,
        "BOSH_PACKAGES_DIR": str(packages_dir),
        **(extra_env or {}),
    }
    env = {key: value for key, value in env.items() if value is not None}
    (packages_dir / name).mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        ["bash", "-x", "packaging"], cwd=compile_dir, env=env, capture_output=True, text=True, timeout=timeout
    )


def unpack(archive: bytes, destination: Path) -> Path:
    """A package archive (bytes of packages/<name>.tgz) unpacked as a compile host does."""
    destination.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(destination, filter="tar")
    return destination


def installed_size(path: Path) -> tuple[int, int, int]:
    """(bytes of regular files, bytes of disk blocks, number of files) under `path`; links are
    not followed and a hard-linked file counts once."""
    apparent = blocks = files = 0
    seen = set()
    for directory, _, names in os.walk(path):
        for name in names:
            stat = os.lstat(os.path.join(directory, name))
            if (stat.st_dev, stat.st_ino) in seen:
                continue
            seen.add((stat.st_dev, stat.st_ino))
            files += 1
            apparent += stat.st_size
            blocks += stat.st_blocks * 512
    return apparent, blocks, files


def job_spec() -> dict:
    return yaml.safe_load((JOB_DIR / "spec").read_text())


def alias_spec(name: str) -> dict:
    """The spec BOSH renders job `name` of the release with: job cpi's under an alias."""
    from cpi.release.definition import load_definition
    from cpi.release.reader import alias_job, read_job

    alias = load_definition(REPO).job_aliases[name]
    job = alias_job(read_job(REPO, alias.job), name, alias)
    return yaml.safe_load(next(entry for entry in job.entries if entry.relpath == "job.MF").data or b"")


def render_job(job_dir: Path, properties: dict, tmp_path: Path, ruby: str, spec: dict | None = None) -> Path:
    """Every template of job cpi (`spec` for an alias) rendered into `job_dir` where its spec
    puts it, bin/* executable, as the agent and create-env lay a job out."""
    spec = spec or job_spec()
    for source, destination in spec["templates"].items():
        text = render(JOB_DIR / "templates" / source, properties, tmp_path, ruby, spec)
        write(job_dir / destination, text, 0o755 if destination.startswith("bin/") else 0o644)
    return job_dir


def render(template: Path, properties: dict, tmp_path: Path, ruby: str, spec: dict | None = None) -> str:
    """Render `template` of job cpi with manifest `properties` through Ruby's ERB, with the
    job spec's defaults, as bosh-cli does. Raises RenderError on a template error."""
    spec = spec or job_spec()
    context = {
        "index": 0,
        "id": "6a1f0c2e-test",
        "az": "z1",
        "bootstrap": True,
        "deployment": "test",
        "job": {"name": spec["name"]},
        "networks": {"default": {"ip": "10.0.0.5", "netmask": "255.255.255.0", "gateway": "10.0.0.1"}},
        "job_properties": properties,
        "default_properties": {name: (d or {}).get("default") for name, d in spec["properties"].items()},
    }
    context_path = tmp_path / f"context-{os.getpid()}-{len(list(tmp_path.iterdir()))}.json"
    context_path.write_text(json.dumps(context))
    output = context_path.with_suffix(".out")
    result = subprocess.run(
        [ruby, str(RENDERER), str(context_path), str(template), str(output)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if result.returncode != 0:
        raise RenderError(result.stderr)
    return output.read_text()


class RenderError(Exception):
    pass


def _open_tar(archive: Path | bytes) -> tarfile.TarFile:
    """An archive given as a path or as bytes, open for reading (any compression)."""
    if isinstance(archive, bytes):
        return tarfile.open(fileobj=io.BytesIO(archive), mode="r:*")
    return tarfile.open(archive, mode="r:*")


def members(archive: Path | bytes) -> dict[str, tarfile.TarInfo]:
    """name -> TarInfo of an archive (a path or bytes), in archive order. Directories end
    in "/" as `tar -t` shows them (tarfile strips it)."""
    with _open_tar(archive) as tar:
        return {info.name + ("/" if info.isdir() else ""): info for info in tar.getmembers()}


def read_member(archive: Path | bytes, name: str) -> bytes:
    with _open_tar(archive) as tar:
        extracted = tar.extractfile(name)
        assert extracted is not None, f"{name} is not a file in the archive"
        return extracted.read()
