"""Read a release directory into checked, fingerprinted jobs, packages and license.

Everything bosh-cli (create-release), create-env or the director would refuse is refused
here first, with the file and the fix in the message:

- jobs: the spec parses and its name equals the directory; `monit` exists (the director
  rejects a job without one); every template source exists; every package it uses exists;
- packages: the spec parses and its name equals the directory; `packaging` exists and is
  not also matched by `files`; every `files` glob matches at least one file under the
  source roots; dependencies resolve, without cycles;
- jobs list the packages their packages depend on (BOSH installs only what a job lists).

Nothing is written: `builder` turns the result into archives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import yaml

from cpi.release import globs, graph
from cpi.release.definition import JobAlias, ReleaseDefinition, load_definition
from cpi.release.errors import ReleaseError
from cpi.release.fingerprint import Entry, bytes_entry, file_entry, fingerprint
from cpi.release.specs import JobSpec, PackageSpec, load_job_spec, load_package_spec

#: A job's spec or a package's: what _listed reads and checks the name of.
S = TypeVar("S", JobSpec, PackageSpec)

SPECIAL_PACKAGE_FILES = ("packaging", "pre_packaging")


@dataclass
class Job:
    name: str
    spec: JobSpec
    entries: list[Entry]
    fingerprint: str


@dataclass
class Package:
    name: str
    spec: PackageSpec
    entries: list[Entry]
    fingerprint: str


@dataclass
class License:
    entries: list[Entry]
    fingerprint: str


@dataclass
class ReleaseContents:
    release_dir: Path
    definition: ReleaseDefinition
    jobs: list[Job]  # sorted by name
    packages: list[Package]  # sorted by name
    license: License | None
    compile_order: list[str]
    warnings: list[str] = field(default_factory=list)


def _listed(release_dir: Path, kind: str, name: str, load: Callable[[Path], S]) -> tuple[Path, Path, S]:
    """The directory of a job or package release.yml lists, its spec's path and the spec
    `load` reads: both must be there and the spec must name the directory, as bosh
    create-release wants them, before anything else of it is read."""
    directory = release_dir / f"{kind}s" / name
    if not directory.is_dir():
        raise ReleaseError(f"{kind} '{name}' is listed in release.yml but {directory} is not a directory")
    spec_path = directory / "spec"
    if not spec_path.is_file():
        raise ReleaseError(f"{kind} '{name}': {spec_path} is missing (every {kind} needs a spec)")
    spec = load(spec_path)
    if spec.name != name:
        raise ReleaseError(f"{kind} directory '{name}' does not match {kind} name '{spec.name}' in {spec_path}")
    return directory, spec_path, spec


def read_job(release_dir: Path, name: str) -> Job:
    job_dir, spec_path, spec = _listed(release_dir, "job", name, load_job_spec)
    monit = job_dir / "monit"
    if not monit.is_file():
        raise ReleaseError(
            f"job '{name}': {monit} is missing. The director rejects a job without a monit file; "
            f"an empty file is fine for a job that runs no process"
        )
    entries = [
        file_entry(spec_path, "job.MF", with_mode=True, follow_symlinks=True),
        file_entry(monit, "monit", with_mode=True, follow_symlinks=True),
    ]
    schema = job_dir / "properties_schema.json"
    if schema.is_file():
        entries.append(file_entry(schema, "properties_schema.json", with_mode=True, follow_symlinks=True))
    for source in spec.templates:
        template = job_dir / "templates" / source
        if not template.is_file():
            raise ReleaseError(
                f"job '{name}': template '{source}' (rendered to {spec.templates[source]}) is missing: "
                f"expected {template}"
            )
        entries.append(file_entry(template, f"templates/{source}", with_mode=True, follow_symlinks=True))
    return Job(name, spec, entries, fingerprint(entries))


def alias_job(job: Job, name: str, alias: JobAlias) -> Job:
    """`job` under another name: the same monit and templates, a job.MF with that name and
    the alias's property defaults (written as YAML, so the director reads it as it reads any
    spec)."""
    spec_entry = next(entry for entry in job.entries if entry.relpath == "job.MF")
    document = yaml.safe_load(spec_entry.path.read_text())
    unknown = sorted(set(alias.defaults) - set(document.get("properties") or {}))
    if unknown:
        raise ReleaseError(f"job alias '{name}': {', '.join(unknown)} is not a property of job '{job.name}'")
    document["name"] = name
    document["description"] = f"Job {job.name} under the name {name}. " + (document.get("description") or "")
    for key, value in alias.defaults.items():
        document["properties"][key]["default"] = value
    data = yaml.safe_dump(document, sort_keys=False, width=100).encode()
    entries = [bytes_entry(data, "job.MF", spec_entry.path),
               *(entry for entry in job.entries if entry.relpath != "job.MF")]
    spec = JobSpec.model_validate(document)
    return Job(name, spec, entries, fingerprint(entries))


def _blob_hint(definition: ReleaseDefinition, pattern: str) -> str:
    vendor = definition.vendor
    if vendor is None:
        return ""
    if pattern.startswith(vendor.wheels_dir + "/"):
        return f" These are blobs: run `cpi release vendor` to download the wheels into {vendor.blobs_root}/."
    if pattern.startswith(vendor.python_source_dir + "/"):
        return (
            f" This is a blob: run `cpi release vendor --python-source PATH` with a CPython "
            f"{vendor.python}.x source tarball (Python-{vendor.python}.N.tgz or .tar.xz)."
        )
    return ""


def package_files(release_dir: Path, definition: ReleaseDefinition, spec: PackageSpec) -> dict[str, Path]:
    """relpath -> file for the package's `files` minus `excluded_files`, the earlier source
    root winning on the same relpath."""
    roots = [release_dir / root for root in definition.source_roots]
    matched: dict[str, Path] = {}
    for pattern in spec.files:
        found = False
        for root in roots:
            for relpath in globs.match(root, pattern):
                found = True
                matched.setdefault(relpath, root / relpath)
        if not found:
            where = ", ".join(f"{root}/" for root in definition.source_roots)
            raise ReleaseError(
                f"package '{spec.name}': no file matches '{pattern}' under {where} "
                f"(every files pattern must match at least one file; directories and files "
                f"reached through a symlinked directory do not count).{_blob_hint(definition, pattern)}"
            )
    for pattern in spec.excluded_files:
        for root in roots:
            for relpath in globs.match(root, pattern):
                matched.pop(relpath, None)
    for special in SPECIAL_PACKAGE_FILES:
        if special in matched:
            raise ReleaseError(
                f"package '{spec.name}': '{special}' must not be included through files "
                f"(it is taken from packages/{spec.name}/ and packed at the archive's top)"
            )
    return matched


def read_package(release_dir: Path, definition: ReleaseDefinition, name: str) -> Package:
    # Before the directory's checks (a missing directory has no spec.lock either): a vendored
    # package has a spec.lock and no spec, and the spec.lock is what the operator must hear of.
    if (release_dir / "packages" / name / "spec.lock").exists():
        raise ReleaseError(
            f"package '{name}': spec.lock (a package vendored with `bosh vendor-package`) is not "
            f"supported by this builder; copy the package's spec and packaging instead"
        )
    package_dir, _, spec = _listed(release_dir, "package", name, load_package_spec)
    packaging = package_dir / "packaging"
    if not packaging.is_file():
        raise ReleaseError(f"package '{name}': {packaging} is missing (the script the compile host runs with bash)")
    entries = [file_entry(packaging, "packaging", with_mode=False, follow_symlinks=False)]
    pre_packaging = package_dir / "pre_packaging"
    if pre_packaging.exists():
        raise ReleaseError(
            f"package '{name}': pre_packaging scripts are not supported by this builder "
            f"(bosh-cli runs them at build time); do that work in packaging"
        )
    for relpath, path in sorted(package_files(release_dir, definition, spec).items()):
        entries.append(file_entry(path, relpath, with_mode=True, follow_symlinks=False))
    return Package(name, spec, entries, fingerprint(entries, spec.dependencies))


def read_license(release_dir: Path, definition: ReleaseDefinition) -> License | None:
    paths: dict[str, Path] = {}
    for pattern in definition.license:
        for relpath in globs.match(release_dir, pattern):
            paths.setdefault(relpath, release_dir / relpath)
    if not paths:
        return None
    entries = [file_entry(path, relpath, with_mode=False, follow_symlinks=True) for relpath, path in paths.items()]
    return License(entries, fingerprint(entries))


def read_release(release_dir: Path, definition: ReleaseDefinition | None = None) -> ReleaseContents:
    """Load release.yml (unless given) and everything it names; check it all; fingerprint
    it all."""
    release_dir = Path(release_dir)
    definition = definition or load_definition(release_dir)
    warnings = []

    jobs = [read_job(release_dir, name) for name in definition.jobs]
    by_name = {job.name: job for job in jobs}
    jobs += [alias_job(by_name[alias.job], name, alias) for name, alias in definition.job_aliases.items()]
    packages = [read_package(release_dir, definition, name) for name in definition.packages]

    package_dependencies = {package.name: package.spec.dependencies for package in packages}
    job_packages = {job.name: job.spec.packages for job in jobs}
    graph.check_known(package_dependencies, job_packages)
    order = graph.compile_order(package_dependencies)
    graph.check_job_closure(job_packages, package_dependencies)

    used = graph.closure([p for job in jobs for p in job.spec.packages], package_dependencies)
    for package in packages:
        if package.name not in used:
            warnings.append(f"package '{package.name}' is used by no job")
    for kind, listed in (("jobs", definition.jobs), ("packages", definition.packages)):
        directory = release_dir / kind
        if directory.is_dir():
            for extra in sorted(p.name for p in directory.iterdir() if p.is_dir() and p.name not in listed):
                warnings.append(f"{kind}/{extra} is not listed in release.yml and is left out")

    license_ = read_license(release_dir, definition)
    if license_ is None and definition.license:
        warnings.append(f"no license file matches {', '.join(definition.license)}: the release has no license")

    return ReleaseContents(
        release_dir=release_dir,
        definition=definition,
        jobs=sorted(jobs, key=lambda job: job.name),
        packages=sorted(packages, key=lambda package: package.name),
        license=license_,
        compile_order=order,
        warnings=warnings,
    )
