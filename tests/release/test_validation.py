"""Every check the builder makes, each failing with a message that says what to fix."""

from __future__ import annotations

import shutil

import pytest
import yaml

from cpi.release.builder import build_release
from cpi.release.errors import ReleaseError
from cpi.release.reader import read_release
from tests.release.support import minimal_release, write, write_yaml


@pytest.fixture
def release(tmp_path):
    return minimal_release(tmp_path / "release")


def edit_yaml(path, change):
    data = yaml.safe_load(path.read_text())
    change(data)
    write_yaml(path, data)


def fails(release, *patterns):
    with pytest.raises(ReleaseError) as caught:
        read_release(release)
    for pattern in patterns:
        assert pattern in str(caught.value), str(caught.value)
    return str(caught.value)


def test_the_minimal_release_is_valid(release):
    contents = read_release(release)
    assert [j.name for j in contents.jobs] == ["web"]
    assert [p.name for p in contents.packages] == ["app", "runtime"]
    assert contents.compile_order == ["runtime", "app"]
    assert contents.warnings == []


# --- release.yml ---------------------------------------------------------------------------


def test_missing_release_yml(tmp_path):
    with pytest.raises(ReleaseError,
                       match=r"release\.yml: not found\. Run from the project root or pass --release-dir"):
        read_release(tmp_path)


def test_release_yml_not_yaml(release):
    write(release / "release.yml", "name: [unclosed\n")
    message = fails(release, "not valid YAML: ", "release.yml:2:1: ")  # one line, where it is wrong (#32)
    assert "\n" not in message


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.update(name="my release"), "release name 'my release' must start with a letter or digit"),
        (lambda d: d.update(version="1.0 beta"), "is not a BOSH version"),
        (lambda d: d.update(version=1.10), "was read as a number: quote it in YAML"),
        (lambda d: d.update(jobs=[]), "jobs: List should have at least 1 item"),
        (lambda d: d.update(jobs=["web", "web"]), "jobs listed twice: web"),
        (lambda d: d.update(packages=["app", "bad/name"]), "package name 'bad/name'"),
        (lambda d: d.update(licence=["LICENSE"]), "licence: unknown key"),
        (lambda d: d.update(license=["docs/LICENSE"]), "must name files at the release root"),
        (lambda d: d.pop("version"), "version: Field required"),
    ],
)
def test_release_yml_fields(release, change, message):
    edit_yaml(release / "release.yml", change)
    fails(release, "release.yml", message)


def test_integer_versions_are_fine(release):
    edit_yaml(release / "release.yml", lambda d: d.update(version=7))
    assert read_release(release).definition.version == "7"


# --- jobs ------------------------------------------------------------------------------------


def test_listed_job_without_directory(release):
    edit_yaml(release / "release.yml", lambda d: d.update(jobs=["web", "worker"]))
    fails(release, "job 'worker' is listed in release.yml but", "is not a directory")


def test_job_without_spec(release):
    (release / "jobs/web/spec").unlink()
    fails(release, "job 'web'", "spec is missing")


def test_job_directory_must_match_spec_name(release):
    edit_yaml(release / "jobs/web/spec", lambda d: d.update(name="webserver"))
    fails(release, "job directory 'web' does not match job name 'webserver'")


def test_job_without_monit(release):
    (release / "jobs/web/monit").unlink()
    fails(release, "job 'web'", "monit is missing", "an empty file is fine")


def test_missing_template_file(release):
    (release / "jobs/web/templates/ctl.erb").unlink()
    fails(release, "job 'web': template 'ctl.erb' (rendered to bin/ctl) is missing")


@pytest.mark.parametrize(("aliases", "message"), [
    ({"web": {"job": "web"}}, "job alias 'web' is also a job directory listed in jobs"),
    ({"web_two": {"job": "nope"}}, "job alias 'web_two' is of job 'nope', which jobs does not list"),
    ({"web two": {"job": "web"}}, "job name 'web two'"),
    ({"web_two": {"job": "web", "defaults": {"no.such": 1}}},
     "job alias 'web_two': no.such is not a property of job 'web'"),
])
def test_job_aliases_name_a_listed_job_and_its_properties(release, aliases, message):
    edit_yaml(release / "release.yml", lambda d: d.update(job_aliases=aliases))
    fails(release, message)


def test_a_job_alias_is_the_job_under_its_name_with_its_defaults(release):
    edit_yaml(release / "jobs/web/spec", lambda d: d.update(properties={"port": {"description": "p", "default": 80}}))
    edit_yaml(release / "release.yml", lambda d: d.update(job_aliases={"web_alt": {"job": "web",
                                                                                  "defaults": {"port": 8080}}}))
    jobs = {job.name: job for job in read_release(release).jobs}
    assert jobs["web_alt"].spec.name == "web_alt" and jobs["web_alt"].spec.properties["port"].default == 8080
    assert jobs["web"].spec.properties["port"].default == 80
    assert jobs["web_alt"].fingerprint != jobs["web"].fingerprint
    others = [(e.relpath, e.digest) for e in jobs["web_alt"].entries if e.relpath != "job.MF"]
    assert others == [(e.relpath, e.digest) for e in jobs["web"].entries if e.relpath != "job.MF"]


def test_job_spec_unknown_key(release):
    edit_yaml(release / "jobs/web/spec", lambda d: d.update(template={"a": "b"}))
    fails(release, "jobs/web/spec: template: unknown key")


def test_job_spec_template_paths_stay_inside(release):
    edit_yaml(release / "jobs/web/spec", lambda d: d["templates"].update({"x.erb": "../../etc/passwd"}))
    fails(release, "must be relative, without '..'")


def test_two_templates_to_one_destination(release):
    write(release / "jobs/web/templates/other.erb", "x")
    edit_yaml(release / "jobs/web/spec", lambda d: d["templates"].update({"other.erb": "bin/ctl"}))
    fails(release, "several templates render to bin/ctl")


def test_job_uses_unknown_package(release):
    edit_yaml(release / "jobs/web/spec", lambda d: d["packages"].append("nginx"))
    fails(release, "job 'web' uses package 'nginx', which is not a package of this release")


def test_job_must_list_its_packages_dependencies(release):
    edit_yaml(release / "jobs/web/spec", lambda d: d.update(packages=["app"]))
    fails(release, "job 'web' must also list the packages its packages depend on: 'runtime' (needed by app)")


# --- packages --------------------------------------------------------------------------------


def test_listed_package_without_directory(release):
    shutil.rmtree(release / "packages/runtime")
    fails(release, "package 'runtime' is listed in release.yml but")


def test_package_directory_must_match_spec_name(release):
    edit_yaml(release / "packages/app/spec", lambda d: d.update(name="application"))
    fails(release, "package directory 'app' does not match package name 'application'")


def test_package_without_packaging(release):
    (release / "packages/app/packaging").unlink()
    fails(release, "package 'app'", "packaging is missing")


def test_package_spec_typo(release):
    edit_yaml(release / "packages/app/spec", lambda d: d.update(dependancies=["runtime"]))
    fails(release, "packages/app/spec: dependancies: unknown key")


def test_files_glob_without_match(release):
    edit_yaml(release / "packages/app/spec", lambda d: d["files"].append("app/**/*.rb"))
    fails(release, "package 'app': no file matches 'app/**/*.rb' under src/, blobs/")


def test_files_glob_matching_only_directories(release):
    (release / "src/empty/dir").mkdir(parents=True)
    edit_yaml(release / "packages/app/spec", lambda d: d["files"].append("empty/*"))
    fails(release, "no file matches 'empty/*'")


def test_packaging_must_not_come_through_files(release):
    write(release / "src/packaging", "echo sneaky\n")
    edit_yaml(release / "packages/app/spec", lambda d: d["files"].append("packaging"))
    fails(release, "package 'app': 'packaging' must not be included through files")


def test_unknown_dependency(release):
    edit_yaml(release / "packages/app/spec", lambda d: d["dependencies"].append("libxml"))
    fails(release, "package 'app' depends on 'libxml', which is not a package of this release")


def test_dependency_cycle(release):
    edit_yaml(release / "packages/runtime/spec", lambda d: d.update(dependencies=["app"]))
    fails(release, "package dependency cycle: app -> runtime -> app")


def test_self_dependency(release):
    edit_yaml(release / "packages/runtime/spec", lambda d: d.update(dependencies=["runtime"]))
    fails(release, "package dependency cycle: runtime -> runtime")


def test_pre_packaging_is_refused(release):
    write(release / "packages/app/pre_packaging", "echo\n")
    fails(release, "pre_packaging scripts are not supported")


def test_vendored_package_lock_is_refused(release):
    write(release / "packages/app/spec.lock", "name: app\nfingerprint: abc\n")
    fails(release, "spec.lock")


# --- warnings, and blobs (vendoring) -----------------------------------------------------------


def test_unlisted_directories_and_unused_packages_are_warnings(release):
    write_yaml(release / "jobs/old/spec", {"name": "old"})
    write_yaml(release / "packages/spare/spec", {"name": "spare"})
    write(release / "packages/spare/packaging", "")
    edit_yaml(release / "release.yml", lambda d: d["packages"].append("spare"))
    warnings = read_release(release).warnings
    assert "package 'spare' is used by no job" in warnings
    assert "jobs/old is not listed in release.yml and is left out" in warnings


def test_missing_license_is_a_warning(release):
    (release / "LICENSE").unlink()
    (release / "NOTICE").unlink()
    contents = read_release(release)
    assert contents.license is None
    assert any("no license file matches" in w for w in contents.warnings)


def _with_vendor(release, **vendor):
    settings = {
        "python": "3.11",
        "platforms": {"linux-x86_64": ["manylinux_2_17_x86_64"]},
        **vendor,
    }
    edit_yaml(release / "release.yml", lambda d: d.update(vendor=settings))
    write(release / "pyproject.toml", '[project]\nname = "x"\ndependencies = ["pydantic>=2"]\n')
    write_yaml(
        release / "packages/app/spec",
        {
            "name": "app",
            "dependencies": ["runtime"],
            "files": ["app/**/*", "wheels/requirements.txt", "wheels/**/*.whl"],
        },
    )


def test_build_names_the_vendor_command_when_wheels_are_missing(release):
    _with_vendor(release)
    with pytest.raises(
        ReleaseError, match=r"requirements.txt is missing: the wheels are blobs.*Run `cpi release vendor`"
    ):
        build_release(release)


def test_glob_error_names_the_vendor_command_for_blob_patterns(release):
    _with_vendor(release)
    fails(release, "no file matches 'wheels/requirements.txt'", "run `cpi release vendor` to download the wheels")


def test_vendor_blobs_root_must_be_a_source_root(release):
    _with_vendor(release, blobs_root="downloads")
    fails(release, "vendor.blobs_root 'downloads' must be one of source_roots")


@pytest.mark.parametrize(
    "vendor, message",
    [
        ({"python": "3"}, "python must be a CPython minor version"),
        ({"platforms": {}}, "platforms: Dictionary should have at least 1 item"),
        ({"platforms": {"linux-x86_64": []}}, "needs at least one pip --platform tag"),
    ],
)
def test_vendor_settings(release, vendor, message):
    _with_vendor(release, **vendor)
    fails(release, message)
