"""Vendoring: wheel layout per platform, the lock's wheels checked against every platform
before any download, the CPython source blob, and the build-time checks that name the
command to run. pip itself is stubbed here; tests/release/test_packaging.py downloads real
wheels for this machine, and tests/unit/test_lock.py checks the real lock's wheels."""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from cpi.release import lockfiles, targets, vendor
from cpi.release.definition import load_definition
from cpi.release.errors import ReleaseError
from cpi.release.lock import parse as parse_lock
from tests.release.support import (
    HOST_PYTHON,
    REPO,
    add_fake_blobs,
    copy_project_release,
    fake_python_source,
    write,
)


@pytest.fixture
def project(tmp_path):
    return copy_project_release(tmp_path / "project", python="3.11")


def test_requirements_come_from_pyproject(project):
    assert vendor.project_requirements(project) == vendor.project_requirements(REPO)
    assert any(r.startswith("pydantic") for r in vendor.project_requirements(project))


def test_requirements_file_round_trip(tmp_path):
    pinned = ["boto3==1.0 --hash=sha256:" + "a" * 64,
              "async-timeout==5.0 ; python_full_version < '3.11.3' --hash=sha256:"
              + "b" * 64]
    text = vendor.requirements_text(["pydantic>=2", "boto3"], "3.11", ["macos-arm64", "linux-x86_64"], "c" * 64, pinned)
    # packages/cpi/packaging reads these two header lines with sed.
    assert "\n# python: 3.11\n" in text
    assert "\n# platforms: linux-x86_64 macos-arm64\n" in text
    assert text.endswith("\n".join(pinned) + "\n")
    path = write(tmp_path / "requirements.txt", text)
    assert vendor.read_requirements(path) == vendor.VendoredState(
        "3.11", ["linux-x86_64", "macos-arm64"], ["pydantic>=2", "boto3"], "c" * 64, pinned
    )


def test_download_asks_pip_for_binary_wheels_of_each_platform(tmp_path):
    calls, environments = [], []

    def pip(args, environment):
        calls.append(args)
        environments.append(environment)
        dest = args[args.index("--dest") + 1]
        platform = args[args.index("--platform") + 1]
        write(tmp_path / dest / "pure-1.0-py3-none-any.whl", "p")
        write(tmp_path / dest / f"fast-1.0-cp311-cp311-{platform}.whl", platform)

    downloaded = vendor.download_wheels(
        ["pydantic>=2"],
        "3.11",
        {"linux-x86_64": ["manylinux_2_17_x86_64"], "macos-arm64": ["macosx_11_0_arm64"]},
        tmp_path / "dl",
        pip,
        tmp_path / "constraints.txt",
    )
    assert sorted(downloaded) == ["linux-x86_64", "macos-arm64"]
    for args in calls:
        assert "--only-binary=:all:" in args
        assert args[args.index("--constraint") + 1] == str(tmp_path / "constraints.txt")  # the lock's versions
        assert args[args.index("--python-version") + 1] == "3.11"
        assert args[args.index("--implementation") + 1] == "cp"
        assert args[-2:] == ["pip", "pydantic>=2"]  # package cpi installs with the vendored pip
    platforms = ["manylinux_2_17_x86_64"] * 2 + ["macosx_11_0_arm64"] * 2  # each with both ends of 3.11.x
    assert [a[a.index("--platform") + 1] for a in calls] == platforms
    assert [(e["sys_platform"], e["platform_machine"], e["python_full_version"]) for e in environments] == [
        ("linux", "x86_64", "3.11.0"), ("linux", "x86_64", "3.11.99"),
        ("darwin", "arm64", "3.11.0"), ("darwin", "arm64", "3.11.99"),
    ]


def test_a_manylinux_tag_stands_for_every_older_glibc():
    tags = vendor.pip_platform_tags(["manylinux_2_17_x86_64"])
    assert tags[0] == "manylinux_2_17_x86_64"
    assert {"manylinux_2_12_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64",
            "manylinux_2_5_x86_64"} <= set(tags)
    assert not [t for t in tags if t.startswith("manylinux_2_18") or "aarch64" in t]
    assert vendor.pip_platform_tags(["macosx_11_0_arm64"]) == ["macosx_11_0_arm64"]


def test_pip_evaluates_markers_for_the_compile_host_not_this_machine(tmp_path):
    """`pip download --python-version 3.11 --platform ...` alone would judge `dep;
    python_full_version < "3.11.3"` and `dep; sys_platform == "darwin"` by the interpreter
    running it: run_pip makes pip's marker environment the target's."""
    probe = vendor.TARGET_MARKERS + (
        "from pip._vendor.packaging.markers import Marker\n"
        "print(Marker('python_full_version < \"3.11.3\" and sys_platform == \"darwin\"').evaluate())\n"
    )
    environment = vendor.marker_environment("macos-arm64", "3.11.2")
    result = subprocess.run([sys.executable, "-c", probe, json.dumps(environment)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"
    assert vendor.marker_environment("linux-aarch64-musl", "3.11.0")["platform_machine"] == "aarch64"


def fake_downloads(tmp_path: Path, pure: list[str]) -> dict[str, list[Path]]:
    """What pip downloads for two platforms: the `pure` wheels for each, and a compiled one."""
    downloaded = {}
    for platform in ("linux-x86_64", "macos-arm64"):
        directory = tmp_path / "dl" / platform
        downloaded[platform] = [write(directory / name, name.split("-")[0]) for name in pure]
        downloaded[platform].append(write(directory / f"pydantic_core-2.0-cp311-cp311-{platform}.whl", platform))
    return downloaded


def test_arrange_puts_pure_wheels_once_in_any(tmp_path):
    downloaded = fake_downloads(tmp_path, ["boto3-1.0-py3-none-any.whl", "six-1.0-py2.py3-none-any.whl"])
    wheels = tmp_path / "blobs/wheels"
    write(wheels / "stale-platform/old.whl", "old")  # replaced wholesale
    counts = vendor.arrange_wheels(downloaded, wheels, ["boto3"], "3.11")
    assert counts == {"any": 2, "linux-x86_64": 1, "macos-arm64": 1}
    assert sorted(p.name for p in (wheels / "any").iterdir()) == [
        "boto3-1.0-py3-none-any.whl",
        "six-1.0-py2.py3-none-any.whl",
    ]
    assert not (wheels / "stale-platform").exists()
    state = vendor.read_requirements(wheels / "requirements.txt")
    assert state == vendor.VendoredState("3.11", ["linux-x86_64", "macos-arm64"], ["boto3"], None, [])


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


LOCK_TEXT = f"""# This file was autogenerated by uv via the following command:
#    bin/lock
boto3==1.0 \\
    --hash=sha256:{sha256("boto3 wheel")} \\
    --hash=sha256:{sha256("boto3 sdist")}
    # via bosh-python-cpi (pyproject.toml)
pip==26.0 \\
    --hash=sha256:{sha256("pip wheel")}
pydantic-core==2.0 ; python_full_version >= '3.11' \\
    --hash=sha256:{sha256("linux-x86_64")} \\
    --hash=sha256:{sha256("macos-arm64")} \\
    --hash=sha256:{sha256("windows")}
    # via pydantic
"""
LOCK_FILES = f"""# sha256  file name, as bin/lock writes requirements.files
{sha256("boto3 wheel")}  boto3-1.0-py3-none-any.whl
{sha256("boto3 sdist")}  boto3-1.0.tar.gz
{sha256("pip wheel")}  pip-26.0-py3-none-any.whl
{sha256("linux-x86_64")}  pydantic_core-2.0-cp311-cp311-manylinux_2_17_x86_64.whl
{sha256("macos-arm64")}  pydantic_core-2.0-cp311-cp311-macosx_11_0_arm64.whl
{sha256("windows")}  pydantic_core-2.0-cp311-cp311-win_amd64.whl
"""


def lock_downloads(tmp_path):
    downloaded = {}
    for platform in ("linux-x86_64", "macos-arm64"):
        directory = tmp_path / "dl" / platform
        downloaded[platform] = [
            write(directory / "boto3-1.0-py3-none-any.whl", "boto3 wheel"),
            write(directory / "pip-26.0-py3-none-any.whl", "pip wheel"),
            write(directory / f"pydantic_core-2.0-cp311-cp311-{platform.replace('-', '_')}.whl", platform),
        ]
    return downloaded


def test_the_lock_reader_reads_what_bin_lock_writes():
    pins = parse_lock(LOCK_TEXT + "six==1.17.0 \\\n    --hash=sha256:" + "a" * 64 + "\n    # via\n    #   boto3\n"
                                  "    #   pydantic-core\n")
    assert [(p.key, p.version, p.marker, len(p.hashes), sorted(p.required_by)) for p in pins] == [
        ("boto3", "1.0", None, 2, ["bosh-python-cpi"]),
        ("pip", "26.0", None, 1, []),
        ("pydantic-core", "2.0", "python_full_version >= '3.11'", 3, ["pydantic"]),
        ("six", "1.17.0", None, 1, ["boto3", "pydantic-core"]),  # uv's `# via` over several lines
    ]
    assert parse_lock((REPO / "requirements.lock").read_text()), "the project's lock reads"
    with pytest.raises(ReleaseError, match="without a --hash"):
        parse_lock("boto3==1.0\n")
    with pytest.raises(ReleaseError, match="not `name==version"):
        parse_lock("boto3>=1.0 --hash=sha256:" + "a" * 64 + "\n")


def test_vendored_requirements_are_the_locked_lines_with_the_hashes_of_the_wheels_vendored(tmp_path):
    lines = vendor.locked_lines(lock_downloads(tmp_path), parse_lock(LOCK_TEXT))
    assert lines == [
        f"boto3==1.0 --hash=sha256:{sha256('boto3 wheel')}",  # not the sdist's: no compile host builds one
        "pydantic-core==2.0 ; python_full_version >= '3.11' --hash=sha256:"
        + " --hash=sha256:".join(sorted([sha256("linux-x86_64"), sha256("macos-arm64")])),
    ]  # and not pip: package cpi runs it from its wheel


def test_a_wheel_the_lock_does_not_pin_is_refused(tmp_path):
    downloaded = lock_downloads(tmp_path)
    downloaded["linux-x86_64"].append(write(tmp_path / "dl/linux-x86_64/six-1.17.0-py2.py3-none-any.whl", "six"))
    with pytest.raises(ReleaseError,
                       match=r"six-1\.17\.0-py2\.py3-none-any\.whl, a version requirements\.lock does not "
                                           r"pin.*run bin/lock"):
        vendor.locked_lines(downloaded, parse_lock(LOCK_TEXT))


def test_a_wheel_whose_bytes_the_lock_does_not_accept_is_refused(tmp_path):
    downloaded = lock_downloads(tmp_path)
    write(downloaded["macos-arm64"][2], "tampered")
    with pytest.raises(ReleaseError, match=r"pydantic_core-2.0-cp311-cp311-macos_arm64.whl: its sha256 .* is not one "
                                           r"requirements.lock accepts for pydantic-core==2.0"):
        vendor.locked_lines(downloaded, parse_lock(LOCK_TEXT))


def test_vendoring_downloads_the_locked_versions_only(project):
    """vendor_wheels hands pip the lock as constraints and writes the lock's lines: a stub
    pip that 'downloads' exactly what the constraints pin, with the locked bytes."""
    write(project / "requirements.lock", LOCK_TEXT)
    write(project / "requirements.files", LOCK_FILES)
    seen = []

    def pip(args, environment):
        constraints = Path(args[args.index("--constraint") + 1]).read_text().splitlines()
        seen.append(constraints)
        dest = Path(args[args.index("--dest") + 1])
        write(dest / "boto3-1.0-py3-none-any.whl", "boto3 wheel")
        write(dest / "pip-26.0-py3-none-any.whl", "pip wheel")
        write(dest / "pydantic_core-2.0-cp311-cp311-manylinux_2_17_x86_64.whl", "linux-x86_64")

    vendor.vendor_wheels(project, load_definition(project), ["linux-x86_64"], pip=pip)
    assert seen[0] == ["boto3==1.0", "pip==26.0", "pydantic-core==2.0 ; python_full_version >= '3.11'"]
    state = vendor.read_requirements(project / "blobs/wheels/requirements.txt")
    assert state.lock == hashlib.sha256(LOCK_TEXT.encode()).hexdigest()
    assert [line.split(" ")[0] for line in state.pinned] == ["boto3==1.0", "pydantic-core==2.0"]



def test_vendoring_writes_nothing_when_a_file_is_not_the_one_the_lock_names(project):
    """The bytes of a locked file under another locked file's name (a Linux wheel named as
    a Windows one: the pin's hashes alone accept it): vendoring checks each file by name
    and sha256 against requirements.files, names it with both hashes and writes nothing."""
    write(project / "requirements.lock", LOCK_TEXT)
    write(project / "requirements.files", LOCK_FILES)

    def pip(args, environment):
        dest = Path(args[args.index("--dest") + 1])
        write(dest / "boto3-1.0-py3-none-any.whl", "boto3 wheel")
        write(dest / "pip-26.0-py3-none-any.whl", "pip wheel")
        write(dest / "pydantic_core-2.0-cp311-cp311-win_amd64.whl", "linux-x86_64")

    with pytest.raises(ReleaseError) as failure:
        vendor.vendor_wheels(project, load_definition(project), ["linux-x86_64"], pip=pip)
    assert "pydantic_core-2.0-cp311-cp311-win_amd64.whl with sha256 " + sha256("linux-x86_64") in str(failure.value)
    assert f"accepts only {sha256('windows')} for it: nothing was vendored" in str(failure.value)
    assert not (project / "blobs/wheels").exists()

# A compiled runtime package (PyYAML is one of pyproject.toml's dependencies) with wheels for
# some hosts only, and a compiled test tool the release never installs.
YAML_LOCK = f"""pip==26.0 \\
    --hash=sha256:{sha256("pip wheel")}
pyyaml==6.0 \\
    --hash=sha256:{sha256("yaml linux")} \\
    --hash=sha256:{sha256("yaml arm64")} \\
    --hash=sha256:{sha256("yaml sdist")}
    # via bosh-python-cpi (pyproject.toml)
ruff==0.17 \\
    --hash=sha256:{sha256("ruff linux")}
    # via bosh-python-cpi (pyproject.toml)
"""
YAML_FILES = f"""{sha256("pip wheel")}  pip-26.0-py3-none-any.whl
{sha256("yaml linux")}  PyYAML-6.0-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
{sha256("yaml arm64")}  PyYAML-6.0-cp311-cp311-macosx_11_0_arm64.whl
{sha256("yaml sdist")}  PyYAML-6.0.tar.gz
{sha256("ruff linux")}  ruff-0.17-py3-none-manylinux_2_17_x86_64.whl
"""


def test_a_platform_the_lock_has_no_wheel_for_stops_vendoring_before_any_download(project):
    """What `cpi release vendor` once met as pip's ResolutionImpossible halfway through
    (cryptography without an Intel macOS wheel) is named up front, for every platform that
    lacks one; a test tool's missing wheel does not matter, the release never installs it."""
    write(project / "requirements.lock", YAML_LOCK)
    write(project / "requirements.files", YAML_FILES)

    def pip(args, environment):
        raise AssertionError("pip must not run: the check is offline")

    with pytest.raises(ReleaseError) as failure:
        vendor.vendor_wheels(project, load_definition(project), pip=pip)
    message = str(failure.value)
    assert ("pyyaml==6.0 has no wheel for macos-x86_64 (macosx_11_0_x86_64), CPython 3.11; its wheels are for: "
            "macosx_11_0_arm64, manylinux2014_x86_64.manylinux_2_17_x86_64") in message
    assert "pyyaml==6.0 has no wheel for linux-aarch64" in message
    assert "ruff" not in message and "macos-arm64" not in message
    assert "bin/lock" in message and "release.yml vendor.platforms" in message
    # A universal2 wheel fits both Macs: with one, only linux-aarch64 is left without.
    write(project / "requirements.files", YAML_FILES.replace("macosx_11_0_arm64", "macosx_10_9_universal2"))
    with pytest.raises(ReleaseError) as failure:
        vendor.vendor_wheels(project, load_definition(project), ["linux-aarch64", "macos-x86_64"], pip=pip)
    assert "linux-aarch64" in str(failure.value) and "macos-x86_64" not in str(failure.value)


def test_a_lock_without_its_file_names_is_refused(project):
    write(project / "requirements.lock", YAML_LOCK)
    write(project / "requirements.files", YAML_FILES.replace(sha256("yaml linux"), "0" * 64))
    problems = lockfiles.missing_wheels(parse_lock(YAML_LOCK), lockfiles.read(project), ["PyYAML"], "3.11",
                                        {"linux-x86_64": ["manylinux_2_17_x86_64"]})
    assert problems == [("pyyaml==6.0 has no wheel for linux-x86_64 (manylinux_2_17_x86_64), CPython 3.11; its "
                         "wheels are for: macosx_11_0_arm64")]
    (project / "requirements.files").unlink()
    with pytest.raises(ReleaseError, match=r"requirements.files: not found; bin/lock writes it"):
        vendor.vendor_wheels(project, load_definition(project), ["linux-x86_64"], pip=lambda args, env: None)


@pytest.mark.parametrize(("wheel", "fits"), [
    ("x-1-cp311-cp311-manylinux_2_17_x86_64.whl", True),
    ("x-1-cp311-abi3-manylinux2014_x86_64.whl", True),  # the legacy name of glibc 2.17
    ("x-1-cp36-abi3-manylinux2010_x86_64.whl", True),  # older stable ABI, older glibc
    ("x-1-cp311-cp311-manylinux_2_28_x86_64.whl", False),  # needs a newer glibc than 2.17
    ("x-1-cp315-abi3-manylinux_2_17_x86_64.whl", False),  # a newer CPython's stable ABI
    ("x-1-cp311-cp311-musllinux_1_2_x86_64.whl", False),
    ("x-1-py3-none-any.whl", True),
])
def test_wheel_tags_are_what_pip_download_accepts_for_a_linux_host(wheel, fits):
    from packaging.utils import parse_wheel_filename

    accepted = targets.wheel_tags("3.11", ["manylinux_2_17_x86_64"])
    assert bool(set(parse_wheel_filename(wheel)[3]) & accepted) is fits


def test_a_macos_tag_stands_for_older_macos_and_universal2_as_pip_expands_it():
    from packaging.tags import Tag

    accepted = targets.wheel_tags("3.11", ["macosx_11_0_x86_64"])
    assert {Tag("cp311", "abi3", "macosx_10_9_universal2"), Tag("cp311", "cp311", "macosx_10_15_x86_64")} <= accepted
    assert Tag("cp311", "cp311", "macosx_11_0_arm64") not in accepted
    assert Tag("cp311", "cp311", "macosx_12_0_x86_64") not in accepted  # newer than the host's macOS 11


def test_requirements_files_is_written_from_uvs_pylock_export():
    pylock = {"packages": [{
        "name": "pyyaml", "version": "6.0",
        "sdist": {"url": "https://files.example/PyYAML-6.0.tar.gz", "hashes": {"sha256": "b" * 64}},
        "wheels": [{"url": "https://files.example/x/PyYAML-6.0-cp311-cp311-macosx_10_9_universal2.whl",
                    "hashes": {"sha256": "a" * 64}},
                   {"name": "PyYAML-6.0-py3-none-any.whl", "url": "https://files.example/y/other%2Bname.whl",
                    "hashes": {"sha256": "c" * 64}}],
    }]}
    text = lockfiles.record_text(pylock)
    assert text.startswith("# Written by bin/lock")
    assert text.splitlines()[-3:] == [f"{'a' * 64}  PyYAML-6.0-cp311-cp311-macosx_10_9_universal2.whl",
                                      f"{'c' * 64}  PyYAML-6.0-py3-none-any.whl", f"{'b' * 64}  PyYAML-6.0.tar.gz"]


def test_vendor_wheels_rejects_unknown_platforms(project):
    with pytest.raises(ReleaseError, match=r"unknown platform.*windows-x86_64.*add a platform there"):
        vendor.vendor_wheels(project, load_definition(project), ["windows-x86_64"], pip=lambda args, env: None)


def test_pip_failure_is_reported(project):
    def pip(args, environment):
        raise ReleaseError("pip download failed (is the package index reachable?)")

    with pytest.raises(ReleaseError, match="index reachable"):
        vendor.vendor_wheels(project, load_definition(project), ["linux-x86_64"], pip=pip)


def test_host_platform_matches_what_the_packaging_script_computes(tmp_path):
    """The Python side (tests, `vendor --host`) and the shell side (packages/cpi/packaging)
    must name this machine alike, or the compile would look in the wrong directory."""
    import subprocess

    script = (REPO / "packages/cpi/packaging").read_text()
    start = script.index("# Which vendored wheels fit this compile host.")
    end = script.index("requirements=wheels/requirements.txt")
    snippet = script[start:end] + 'echo "$platform"\n'
    shell = subprocess.run(["bash", "-c", snippet], capture_output=True, text=True, check=True)
    assert shell.stdout.strip() == vendor.host_platform()


def test_every_release_platform_is_one_the_packaging_script_can_name():
    script = (REPO / "packages/cpi/packaging").read_text()
    for platform in load_definition(REPO).vendor.platforms:
        os_name, _, arch = platform.partition("-")
        assert f"platform={os_name}-" in script
        assert arch in script, f"packages/cpi/packaging never computes {platform}"


# --- CPython source --------------------------------------------------------------------------


def test_python_source_is_added_under_its_version(project, tmp_path):
    source = fake_python_source(tmp_path / "downloads/python3.11_3.11.2.orig.tar.gz", "3.11.2")
    write(project / "blobs/python3/Python-3.11.1.tgz", "older")
    target = vendor.add_python_source(project, load_definition(project), source)
    assert target == project / "blobs/python3/Python-3.11.2.tgz"
    assert target.read_bytes() == source.read_bytes()
    assert sorted(p.name for p in target.parent.iterdir()) == ["Python-3.11.2.tgz"]


def test_xz_python_source_keeps_its_compression(project, tmp_path):
    gz = fake_python_source(tmp_path / "a.tgz", "3.11.9")
    with tarfile.open(gz) as tar_in, tarfile.open(tmp_path / "Python-3.11.9.tar.xz", "w:xz") as tar_out:
        for member in tar_in.getmembers():
            tar_out.addfile(member, tar_in.extractfile(member))
    target = vendor.add_python_source(project, load_definition(project), tmp_path / "Python-3.11.9.tar.xz")
    assert target.name == "Python-3.11.9.tar.xz"
    lzma.decompress(target.read_bytes())


def test_python_source_missing_file(project, tmp_path):
    with pytest.raises(ReleaseError, match=r"does not exist. Download Python-X.Y.Z.tgz from python.org"):
        vendor.add_python_source(project, load_definition(project), tmp_path / "nope.tgz")


def test_python_source_of_another_minor_version(project, tmp_path):
    source = fake_python_source(tmp_path / "Python-3.12.1.tgz", "3.12.1")
    with pytest.raises(ReleaseError, match=r"is CPython 3.12.1, but release.yml vendor.python is 3.11"):
        vendor.add_python_source(project, load_definition(project), source)


def test_not_a_python_source(project, tmp_path):
    path = tmp_path / "Python-3.11.2.tgz"
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("something-else/README")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(ReleaseError, match="not a CPython source tarball"):
        vendor.add_python_source(project, load_definition(project), path)
    write(path, "not a tarball at all")
    with pytest.raises(ReleaseError, match="not a readable tar archive"):
        vendor.add_python_source(project, load_definition(project), path)


# --- build-time checks -----------------------------------------------------------------------


@pytest.fixture
def vendored(tmp_path):
    release = copy_project_release(tmp_path / "vendored")
    add_fake_blobs(release)
    return release


def check(release):
    return vendor.check_vendored(release, load_definition(release))


def test_fully_vendored_release_passes(vendored):
    assert check(vendored) == []


def test_stale_wheels_after_a_dependency_change(vendored):
    pyproject = vendored / "pyproject.toml"
    before = pyproject.read_text()
    after = before.replace('"pydantic>=2.6,<3",', '"pydantic>=2.7,<3",')
    assert after != before, "the test must change a dependency that pyproject.toml has"
    pyproject.write_text(after)
    with pytest.raises(ReleaseError, match=r"the vendored wheels are stale.*Run `cpi release vendor` again"):
        check(vendored)


def test_stale_wheels_after_a_lock_change(vendored):
    lock_file = vendored / "requirements.lock"
    lock_file.write_text(lock_file.read_text() + "\n")
    with pytest.raises(ReleaseError, match=r"requirements.lock changed since they were downloaded.*Run `cpi release "
                                           r"vendor` again"):
        check(vendored)


def test_wheels_for_another_python(vendored):
    definition = yaml.safe_load((vendored / "release.yml").read_text())
    definition["vendor"]["python"] = "3.99"
    write(vendored / "release.yml", yaml.safe_dump(definition))
    with pytest.raises(ReleaseError, match=f"wheels are for CPython {HOST_PYTHON}, release.yml vendor.python is 3.99"):
        check(vendored)


def test_missing_platform_is_a_warning(vendored):
    requirements = vendored / "blobs/wheels/requirements.txt"
    requirements.write_text(requirements.read_text().replace(" macos-arm64", ""))
    from cpi.release import checksums

    checksums.write(requirements.parent)  # as `cpi release vendor --platform` would
    (warning,) = check(vendored)
    assert "no wheels vendored for macos-arm64" in warning


@pytest.mark.parametrize("pips", [0, 2])
def test_exactly_one_pip_wheel(vendored, pips):
    for path in (vendored / "blobs/wheels/any").glob("pip-*.whl"):
        path.unlink()
    for n in range(pips):
        write(vendored / f"blobs/wheels/any/pip-{n}.0-py3-none-any.whl", "PK")
    with pytest.raises(ReleaseError, match=rf"holds {pips} pip wheels, not one.*Run `cpi release vendor` again"):
        check(vendored)


def test_missing_python_source(vendored):
    for path in (vendored / "blobs/python3").iterdir():
        path.unlink()
    with pytest.raises(ReleaseError, match=r"no CPython source in .*Run `cpi release vendor --python-source PATH`"):
        check(vendored)


def test_two_python_sources(vendored):
    write(vendored / f"blobs/python3/Python-{HOST_PYTHON}.1.tgz", "x")
    with pytest.raises(ReleaseError, match="several CPython sources"):
        check(vendored)


def test_cli_vendor_adds_the_source_without_network(project, tmp_path, capsys):
    from cpi.release.cli import main

    source = fake_python_source(tmp_path / "Python-3.11.2.tgz", "3.11.2")
    assert main(["vendor", "--release-dir", str(project), "--no-wheels", "--python-source", str(source)]) == 0
    assert "blobs/python3/Python-3.11.2.tgz" in capsys.readouterr().out
    assert (
        main(["vendor", "--release-dir", str(project), "--no-wheels", "--python-source", str(tmp_path / "x.tgz")]) == 1
    )
    assert "cpi release: error:" in capsys.readouterr().err


def test_every_file_the_vendor_step_writes_is_checked_and_shipped(tmp_path):
    """What `cpi release vendor` writes (pure wheels, pip's among them, in any/, compiled ones
    per platform, requirements.txt, SHA256SUMS): SHA256SUMS lists every other file with its
    sha256, so package cpi can check each before it runs pip, and package cpi's spec ships
    every one of them, SHA256SUMS included."""
    from cpi.release import checksums, globs
    from cpi.release.specs import load_package_spec

    downloaded = fake_downloads(tmp_path, ["pip-26.3-py3-none-any.whl", "setuptools-84.2.1-py3-none-any.whl"])
    release = tmp_path / "release"
    wheels = release / "blobs/wheels"
    vendor.arrange_wheels(downloaded, wheels, ["boto3"], "3.11")
    written = checksums.files(wheels)
    sums = checksums.parse((wheels / checksums.SUMS).read_text())
    assert sorted(sums) == written and "any/pip-26.3-py3-none-any.whl" in written
    assert all(sums[name] == hashlib.sha256((wheels / name).read_bytes()).hexdigest() for name in written)
    assert checksums.problems(wheels) == []
    spec = load_package_spec(REPO / "packages/cpi/spec")
    shipped = {path for pattern in spec.files for path in globs.match(release / "blobs", pattern)}
    assert shipped == {f"wheels/{name}" for name in [*written, checksums.SUMS]}


def test_the_compile_time_check_names_every_difference(tmp_path):
    """What package cpi's script runs with package python3 before pip: each changed,
    missing, unlisted or non-regular file is named, one line each, and exit status 1;
    an unreadable SHA256SUMS is a failure, not a pass."""
    from cpi.release import checksums

    wheels = tmp_path / "wheels"
    write(wheels / "any/pip-26.0-py3-none-any.whl", "pip wheel")
    write(wheels / "any/gone-1.0-py3-none-any.whl", "gone")
    write(wheels / "requirements.txt", "x==1\n")
    checksums.write(wheels)
    assert subprocess.run([sys.executable, "-I", str(REPO / "cpi/release/checksums.py"), str(wheels)],
                          timeout=60).returncode == 0
    write(wheels / "any/pip-26.0-py3-none-any.whl", "pip wheeL")
    (wheels / "any/gone-1.0-py3-none-any.whl").unlink()
    write(wheels / "linux-x86_64/extra-1.0-py3-none-any.whl", "extra")
    (wheels / "any/link.whl").symlink_to(wheels / "requirements.txt")
    result = subprocess.run([sys.executable, "-I", str(REPO / "cpi/release/checksums.py"), str(wheels)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"package cpi: {wheels}/any/link.whl is not listed in SHA256SUMS",
        (f"package cpi: {wheels}/any/pip-26.0-py3-none-any.whl: sha256 {sha256('pip wheeL')}, but SHA256SUMS has "
         f"{sha256('pip wheel')}"),
        f"package cpi: {wheels}/linux-x86_64/extra-1.0-py3-none-any.whl is not listed in SHA256SUMS",
        f"package cpi: {wheels}/any/gone-1.0-py3-none-any.whl is listed in SHA256SUMS but missing",
    ]
    write(wheels / "SHA256SUMS", "not a sum\n")
    assert checksums.problems(wheels) == [f"{wheels}/SHA256SUMS: SHA256SUMS line 1 is not `sha256  path`: 'not a sum'"]
    (wheels / "SHA256SUMS").unlink()
    assert checksums.problems(wheels) == [f"{wheels}/SHA256SUMS is missing"]
