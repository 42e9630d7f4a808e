"""The tarball: bosh-cli's layout, release.MF's fields, and byte-identical rebuilds."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cpi.release.builder import build_release
from cpi.release.definition import load_definition
from cpi.release.errors import ReleaseError
from cpi.release.manifest import ReleaseManifest
from cpi.release.reader import read_release
from tests.release.support import (
    HOST_PYTHON,
    REPO,
    add_fake_blobs,
    copy_project_release,
    fake_python_source,
    members,
    minimal_release,
    read_member,
    write,
)


@pytest.fixture
def release(tmp_path):
    return minimal_release(tmp_path / "release")


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_outer_layout_in_bosh_cli_order(release, tmp_path):
    result = build_release(release, tmp_path / "out")
    assert result.tarball == tmp_path / "out" / "demo-1.2.3.tgz"
    assert list(members(result.tarball)) == [
        "release.MF",
        "jobs/",
        "jobs/web.tgz",
        "packages/",
        "packages/app.tgz",
        "packages/runtime.tgz",
        "license.tgz",
        "LICENSE",
        "NOTICE",
        "sbom.cdx.json",  # cpi.release.sbom (tests/release/test_sbom.py)
    ]
    assert result.sha256 == sha256(result.tarball.read_bytes())
    assert result.size == result.tarball.stat().st_size


def test_release_manifest_fields(release, tmp_path):
    result = build_release(release, tmp_path / "out")
    text = read_member(result.tarball, "release.MF").decode()
    raw = yaml.safe_load(text)
    assert list(raw) == [
        "name",
        "version",
        "commit_hash",
        "uncommitted_changes",
        "jobs",
        "packages",
        "license",
        "no_compression",
    ]
    assert raw["name"] == "demo"
    assert raw["version"] == "1.2.3"
    assert raw["commit_hash"] == "non-git"
    assert raw["uncommitted_changes"] is False
    assert raw["no_compression"] is False

    contents = read_release(release)
    fingerprints = {p.name: p.fingerprint for p in contents.packages}
    assert [p["name"] for p in raw["packages"]] == ["app", "runtime"]
    for package in raw["packages"]:
        assert list(package) == ["name", "version", "fingerprint", "sha1", "dependencies"]
        assert package["version"] == package["fingerprint"] == fingerprints[package["name"]]
        assert package["sha1"] == sha256(read_member(result.tarball, f"packages/{package['name']}.tgz"))
    assert raw["packages"][0]["dependencies"] == ["runtime"]
    assert raw["packages"][1]["dependencies"] == []

    (job,) = raw["jobs"]
    assert list(job) == ["name", "version", "fingerprint", "sha1", "packages"]
    assert job["version"] == job["fingerprint"] == contents.jobs[0].fingerprint
    assert job["sha1"] == sha256(read_member(result.tarball, "jobs/web.tgz"))
    assert job["packages"] == ["runtime", "app"]

    assert list(raw["license"]) == ["version", "fingerprint", "sha1"]
    assert raw["license"]["fingerprint"] == contents.license.fingerprint
    assert raw["license"]["sha1"] == sha256(read_member(result.tarball, "license.tgz"))
    assert ReleaseManifest.from_yaml(text) == result.manifest


def test_job_archive(release, tmp_path):
    result = build_release(release, tmp_path / "out")
    job = read_member(result.tarball, "jobs/web.tgz")
    infos = members(job)
    assert list(infos) == ["./job.MF", "./monit", "./templates/", "./templates/config.json.erb", "./templates/ctl.erb"]
    assert read_member(job, "./job.MF") == (release / "jobs/web/spec").read_bytes()
    assert infos["./templates/ctl.erb"].mode == 0o755
    assert infos["./templates/config.json.erb"].mode == 0o644
    assert infos["./templates/"].isdir()


def test_package_archives(release, tmp_path):
    result = build_release(release, tmp_path / "out")
    app = read_member(result.tarball, "packages/app.tgz")
    infos = members(app)
    # packaging at the top; files at their path under src/ or blobs/; excluded files left out.
    assert list(infos) == ["./app/", "./app/bin/", "./app/bin/run", "./app/main.py", "./packaging"]
    assert infos["./app/bin/run"].mode == 0o755
    assert infos["./app/main.py"].mode == 0o644
    assert read_member(app, "./app/main.py") == b"print('hello')\n"
    runtime = read_member(result.tarball, "packages/runtime.tgz")
    assert read_member(runtime, "./runtime/runtime-1.0.tgz") == b"pretend this is a large tarball"
    for info in list(infos.values()) + list(members(result.tarball).values()):
        assert (info.uid, info.gid, info.uname, info.gname) == (0, 0, "root", "root")
        assert info.mtime == 315532800


def test_license_archive_and_loose_copies(release, tmp_path):
    result = build_release(release, tmp_path / "out")
    license_tgz = read_member(result.tarball, "license.tgz")
    assert list(members(license_tgz)) == ["./LICENSE", "./NOTICE"]
    assert read_member(result.tarball, "LICENSE") == (release / "LICENSE").read_bytes()
    assert read_member(license_tgz, "./NOTICE") == (release / "NOTICE").read_bytes()


def test_symlinks_in_packages_stay_symlinks(release, tmp_path):
    os.symlink("main.py", release / "src/app/alias.py")
    result = build_release(release, tmp_path / "out")
    info = members(read_member(result.tarball, "packages/app.tgz"))["./app/alias.py"]
    assert info.issym() and info.linkname == "main.py"


def test_two_builds_are_byte_identical(release, tmp_path):
    first = build_release(release, tmp_path / "one")
    # Same contents, different mtimes, modes that only differ in bits BOSH ignores.
    for path in release.rglob("*"):
        os.utime(path, (1_000_000_000, 1_000_000_000), follow_symlinks=False)
    (release / "src/app/main.py").chmod(0o664)
    second = build_release(release, tmp_path / "two")
    assert first.tarball.read_bytes() == second.tarball.read_bytes()
    assert first.sha256 == second.sha256


def test_gzip_headers_carry_no_name_or_time(release, tmp_path):
    result = build_release(release, tmp_path / "out")
    for data in (result.tarball.read_bytes(), read_member(result.tarball, "jobs/web.tgz")):
        assert data[:2] == b"\x1f\x8b"
        flags, mtime = data[3], int.from_bytes(data[4:8], "little")
        assert flags & 0x08 == 0  # FNAME
        assert mtime == 0
        gzip.decompress(data)


def test_source_date_epoch_sets_member_times(release, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    result = build_release(release, tmp_path / "out")
    assert {info.mtime for info in members(result.tarball).values()} == {1700000000}


def test_content_change_changes_fingerprint_and_digest(release, tmp_path):
    first = build_release(release, tmp_path / "one")
    write(release / "src/app/main.py", "print('bye')\n")
    second = build_release(release, tmp_path / "two")
    assert first.manifest.packages[0].fingerprint != second.manifest.packages[0].fingerprint
    assert first.manifest.packages[1] == second.manifest.packages[1]  # runtime untouched
    assert first.manifest.jobs == second.manifest.jobs


def test_version_override_and_explicit_tarball_path(release, tmp_path):
    result = build_release(release, version="2.0.0-rc.1", tarball=tmp_path / "x" / "r.tgz")
    assert result.tarball == tmp_path / "x" / "r.tgz"
    assert result.manifest.version == "2.0.0-rc.1"
    with pytest.raises(ReleaseError, match="is not a BOSH version"):
        build_release(release, version="two point oh", tarball=tmp_path / "y.tgz")


def test_default_output_is_dev_releases(release):
    result = build_release(release)
    assert result.tarball == release / "dev_releases" / "demo-1.2.3.tgz"


def test_no_compression(release, tmp_path):
    text = (release / "release.yml").read_text() + "no_compression: true\n"
    write(release / "release.yml", text)
    result = build_release(release, tmp_path / "out")
    assert result.tarball.read_bytes()[:2] != b"\x1f\x8b"
    assert result.manifest.no_compression is True
    assert "packages/app.tgz" in members(result.tarball)


def test_failed_build_leaves_no_tarball(release, tmp_path):
    (release / "jobs/web/monit").unlink()
    with pytest.raises(ReleaseError):
        build_release(release, tmp_path / "out")
    assert not (tmp_path / "out" / "demo-1.2.3.tgz").exists()


def test_git_commit_and_dirty_state(release, tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=release, check=True, capture_output=True)

    git("init", "-q")
    assert build_release(release, tmp_path / "a").manifest.commit_hash == "empty"
    git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "x")
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=release, capture_output=True, text=True
    ).stdout.strip()
    clean = build_release(release, tmp_path / "b").manifest
    assert (clean.commit_hash, clean.uncommitted_changes) == (head, False)
    write(release / "src/app/main.py", "print('dirty')\n")
    assert build_release(release, tmp_path / "c").manifest.uncommitted_changes is True


# --- this project's own release ------------------------------------------------------------------


@pytest.fixture
def project_release(tmp_path):
    release = copy_project_release(tmp_path / "project")
    add_fake_blobs(release)
    return release


def test_project_release_builds_with_the_expected_layout(project_release, tmp_path):
    result = build_release(project_release, tmp_path / "out")
    assert result.tarball.name == "bosh-python-cpi-0.1.0.tgz"
    manifest = result.manifest
    assert [(j.name, j.packages) for j in manifest.jobs] == [
        ("aws_cpi", ["python3", "cpi"]), ("cpi", ["python3", "cpi"]), ("openstack_cpi", ["python3", "cpi"]),
        ("vsphere_cpi", ["python3", "cpi"])]
    assert [(p.name, p.dependencies) for p in manifest.packages] == [("cpi", ["python3"]), ("python3", [])]

    job = read_member(result.tarball, "jobs/cpi.tgz")
    assert list(members(job)) == [
        "./job.MF",
        "./monit",
        "./templates/",
        "./templates/cpi-operator.erb",
        "./templates/cpi.erb",
        "./templates/cpi.json.erb",
        "./templates/env.sh.erb",
        "./templates/pre-start.erb",
    ]
    # the official CPIs' job names: job cpi's files, a job.MF of their own
    for alias, plugin in (("aws_cpi", "aws"), ("openstack_cpi", "openstack"), ("vsphere_cpi", "vsphere")):
        aliased = read_member(result.tarball, f"jobs/{alias}.tgz")
        assert list(members(aliased)) == list(members(job))
        for template in [name for name in members(job) if name.startswith("./templates/") and name[-1] != "/"]:
            assert read_member(aliased, template) == read_member(job, template)
        assert read_member(aliased, "./monit") == read_member(job, "./monit")
        spec = yaml.safe_load(read_member(aliased, "./job.MF"))
        original = yaml.safe_load(read_member(job, "./job.MF"))
        assert spec["name"] == alias and spec["properties"]["cloud.plugin"]["default"] == plugin
        assert "default" not in original["properties"]["cloud.plugin"]
        # release.yml's defaults of the alias (the official job's where they differ), the rest as job cpi's
        for key, default in load_definition(REPO).job_aliases[alias].defaults.items():
            assert spec["properties"][key].pop("default") == default
            if "default" in original["properties"][key]:
                spec["properties"][key]["default"] = original["properties"][key]["default"]
        assert spec["properties"] == original["properties"] and spec["templates"] == original["templates"]

    cpi = members(read_member(result.tarball, "packages/cpi.tgz"))
    assert "./packaging" in cpi
    assert "./cpi/release/builder.py" in cpi
    assert "./wheels/requirements.txt" in cpi
    assert "./wheels/any/pure_pkg-1.0-py3-none-any.whl" in cpi
    for platform in ("linux-x86_64", "linux-aarch64", "macos-x86_64", "macos-arm64"):
        assert f"./wheels/{platform}/compiled_pkg-1.0-cp311-cp311-{platform}.whl" in cpi
    assert not [name for name in cpi if "__pycache__" in name or name.endswith(".pyc")]

    if (REPO / "LICENSE").exists():
        assert manifest.license is not None
        assert read_member(result.tarball, "LICENSE") == (REPO / "LICENSE").read_bytes()

    python3 = members(read_member(result.tarball, "packages/python3.tgz"))
    assert [n for n in python3 if not n.endswith("/")] == [
        "./packaging",
        f"./python3/Python-{sys.version_info.major}.{sys.version_info.minor}.99.tgz",
    ]


def test_project_release_builds_twice_identically(project_release, tmp_path):
    first = build_release(project_release, tmp_path / "one")
    second = build_release(project_release, tmp_path / "two")
    assert first.tarball.read_bytes() == second.tarball.read_bytes()


def test_project_release_is_valid_in_the_repository():
    """The checked-in release.yml, jobs/ and packages/ pass every check that needs no blob."""
    from cpi.release import globs
    from cpi.release.definition import load_definition
    from cpi.release.reader import read_job
    from cpi.release.specs import load_package_spec

    definition = load_definition(REPO)
    for name in definition.jobs:
        read_job(REPO, name)
    for name in definition.packages:
        spec = load_package_spec(REPO / "packages" / name / "spec")
        assert spec.name == name and (REPO / "packages" / name / "packaging").is_file()
        for pattern in spec.files:
            blob = pattern.startswith((definition.vendor.wheels_dir + "/", definition.vendor.python_source_dir + "/"))
            assert blob or globs.match(REPO, pattern), f"package {name}: {pattern} matches nothing in the repository"


def test_cli_build_and_error_exit_status(project_release, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "cpi.release",
            "build",
            "--release-dir",
            str(project_release),
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert "bosh-python-cpi-0.1.0.tgz" in ok.stdout
    assert "Package" in ok.stdout and "cpi/" in ok.stdout
    (project_release / "jobs/cpi/monit").unlink()
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "cpi.release",
            "build",
            "--release-dir",
            str(project_release),
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert bad.returncode == 1
    assert bad.stderr.startswith("cpi release: error: job 'cpi':")
    assert "Traceback" not in bad.stderr


# --- every vendored file re-hashed against the lock before it is packed (issue #33) ----------------


def cli_build(release: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cpi.release", "build", "--release-dir", str(release), "--out", str(out)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120,
    )


def flip_last_byte(path: Path) -> tuple[str, str]:
    """Change one byte of `path` in place; return its sha256 before and after."""
    data = bytearray(path.read_bytes())
    before = hashlib.sha256(data).hexdigest()
    data[-1] ^= 0x01
    path.write_bytes(data)
    return before, hashlib.sha256(data).hexdigest()


def test_build_refuses_a_tampered_real_pip_wheel(host_wheels, tmp_path):
    """The real vendored pip wheel with one byte changed, same name: `cpi release build`
    names it with both hashes and writes no tarball (its code would otherwise run on every
    compile host, before pip checks anything)."""
    release = copy_project_release(tmp_path / "release")
    shutil.copytree(host_wheels / "wheels", release / "blobs/wheels")
    fake_python_source(release / "blobs/python3" / f"Python-{HOST_PYTHON}.99.tgz", f"{HOST_PYTHON}.99")
    (pip_wheel,) = (release / "blobs/wheels/any").glob("pip-*.whl")
    locked, tampered = flip_last_byte(pip_wheel)
    result = cli_build(release, tmp_path / "out")
    assert result.returncode == 1, result.stdout
    assert f"{pip_wheel} with sha256 {tampered}, but requirements.lock accepts only" in result.stderr
    assert locked in result.stderr.split(str(pip_wheel), 1)[1].splitlines()[0]
    assert "Traceback" not in result.stderr
    assert not list((tmp_path / "out").glob("*")), "the failed build left something behind"


@pytest.mark.parametrize("change", ["tampered pip", "stray wheel", "stray file", "SHA256SUMS edited"])
def test_build_packs_only_the_locked_files(project_release, tmp_path, change):
    """Each way the vendored directory can differ from what `cpi release vendor` wrote from
    the lock fails the build, naming the file; nothing is produced."""
    wheels = project_release / "blobs/wheels"
    if change == "tampered pip":
        path = wheels / "any/pip-99.0-py3-none-any.whl"
        _, sha256 = flip_last_byte(path)
        expected = f"{path} with sha256 {sha256}, but requirements.lock accepts only"
    elif change == "stray wheel":
        path = write(wheels / "linux-x86_64/evil-1.0-py3-none-any.whl", b"PK evil")
        expected = f"{path} (sha256 {hashlib.sha256(b'PK evil').hexdigest()}), a file requirements.lock does not accept"
    elif change == "stray file":
        path = write(wheels / "any/sitecustomize.py", "import os\n")
        expected = f"{path} is not a wheel `cpi release vendor` writes"
    else:
        sums = wheels / "SHA256SUMS"
        sums.write_text("".join(line for line in sums.read_text().splitlines(True) if "pure_pkg" not in line))
        expected = f"{wheels / 'any/pure_pkg-1.0-py3-none-any.whl'} is not listed in SHA256SUMS"
    with pytest.raises(ReleaseError, match="the vendored files are not the locked ones") as raised:
        build_release(project_release, tmp_path / "out")
    assert expected in str(raised.value)
    assert not (tmp_path / "out/bosh-python-cpi-0.1.0.tgz").exists()
