"""The release's SBOM (cpi.release.sbom): a CycloneDX 1.5 document at the tarball's top,
naming every vendored wheel with the sha256 the compile host checks (wheels/SHA256SUMS) and
the CPython source with its own, valid against CycloneDX's schema, the same bytes in two
builds, and readable with `cpi release sbom`."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys

import pytest

from cpi.release import checksums, sbom
from cpi.release.builder import build_release
from tests.release.support import HOST_PYTHON, add_fake_blobs, copy_project_release, fake_python_source, read_member


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The project's release with stand-in blobs, built twice."""
    release = copy_project_release(tmp_path_factory.mktemp("sbom") / "project")
    add_fake_blobs(release)
    first = build_release(release, release.parent / "one")
    second = build_release(release, release.parent / "two")
    return release, first.tarball, second.tarball


def test_it_names_every_checked_wheel_and_the_cpython_source(built):
    release, tarball, _ = built
    document = json.loads(read_member(tarball, sbom.MEMBER))
    assert (document["bomFormat"], document["specVersion"]) == ("CycloneDX", "1.5")
    assert "timestamp" not in document.get("metadata", {})
    by_ref = {c["bom-ref"]: c for c in document["components"]}
    sums = checksums.parse((release / "blobs/wheels/SHA256SUMS").read_text())
    wheels = {f"wheels/{name}": digest for name, digest in sums.items() if name.endswith(".whl")}
    assert {ref for ref in by_ref if ref.startswith("wheels/")} == set(wheels)
    for ref, digest in wheels.items():
        assert by_ref[ref]["hashes"] == [{"alg": "SHA-256", "content": digest}]
        assert by_ref[ref]["purl"].startswith(f"pkg:pypi/{by_ref[ref]['name']}@{by_ref[ref]['version']}?file_name=")
    (source,) = (release / "blobs/python3").glob("Python-*")
    cpython = by_ref[f"python3/{source.name}"]
    assert (cpython["name"], cpython["version"]) == ("cpython", f"{HOST_PYTHON}.99")
    assert cpython["hashes"] == [{"alg": "SHA-256", "content": hashlib.sha256(source.read_bytes()).hexdigest()}]
    assert cpython["licenses"] == [{"license": {"id": "PSF-2.0"}}]


def test_two_builds_carry_the_same_sbom_and_it_is_valid_cyclonedx(built):
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    _, first, second = built
    data = read_member(first, sbom.MEMBER)
    assert data == read_member(second, sbom.MEMBER)
    error = JsonStrictValidator(SchemaVersion.V1_5).validate_str(data.decode())
    assert error is None, error


def test_cpi_release_sbom_prints_it(built):
    _, tarball, _ = built
    cpi = [sys.executable, "-m", "cpi.cli", "release", "sbom"]
    printed = subprocess.run([*cpi, str(tarball)], capture_output=True, text=True, timeout=120, check=True).stdout
    assert json.loads(printed) == json.loads(read_member(tarball, sbom.MEMBER))
    table = subprocess.run([*cpi, "--table", str(tarball)], capture_output=True, text=True, timeout=120,
                           check=True).stdout
    assert "cpython" in table and "PSF-2.0" in table and "wheels/any/pure_pkg-1.0-py3-none-any.whl" in table
    missing = subprocess.run([*cpi, str(tarball.parent / "none.tgz")], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and missing.stderr.startswith("cpi release: error: cannot read")


def test_real_wheels_carry_their_licences(host_wheels, tmp_path):
    """Licences come from each wheel's own METADATA: the real runtime wheels of this machine."""
    release = copy_project_release(tmp_path / "release")
    shutil.copytree(host_wheels / "wheels", release / "blobs/wheels")
    fake_python_source(release / "blobs/python3" / f"Python-{HOST_PYTHON}.99.tgz", f"{HOST_PYTHON}.99")
    tarball = build_release(release, tmp_path / "out").tarball
    components = {c["name"]: c for c in json.loads(read_member(tarball, sbom.MEMBER))["components"]}
    for name in ("pydantic", "boto3", "tenacity", "pyvmomi", "opentelemetry-sdk"):
        assert components[name].get("licenses"), name
    unlicensed = [name for name, c in components.items() if not c.get("licenses")]
    assert len(unlicensed) <= len(components) // 10, unlicensed
