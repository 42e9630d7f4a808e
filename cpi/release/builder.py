"""release.yml + jobs/ + packages/ -> <name>-<version>.tgz, as bosh-cli lays it out.

Outer archive (members without "./", like `tar -C staging release.MF jobs packages ...`):

    release.MF
    jobs/<job>.tgz            ./job.MF ./monit ./templates/<source> [./properties_schema.json]
    packages/<package>.tgz    ./packaging and every matched file at its relpath
    license.tgz               ./LICENSE ./NOTICE ... (also copied loose to the top)
    sbom.cdx.json             the CycloneDX SBOM of the wheels and CPython (cpi.release.sbom)

The tarball is written next to its final name and renamed into place, so an interrupted
build never leaves a truncated release where create-env would pick it up.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cpi.release import gitinfo, sbom, vendor
from cpi.release.archive import Member, archive_mtime, with_parent_dirs, write_archive
from cpi.release.definition import check_version, load_definition
from cpi.release.errors import ReleaseError
from cpi.release.fingerprint import Entry
from cpi.release.manifest import JobRef, LicenseRef, PackageRef, ReleaseManifest
from cpi.release.reader import ReleaseContents, read_release


@dataclass
class BuildResult:
    tarball: Path
    sha256: str  # "sha256:<hex>"
    size: int
    manifest: ReleaseManifest
    warnings: list[str] = field(default_factory=list)


def _members(entries: list[Entry]) -> list[Member]:
    members = []
    for entry in entries:
        name = "./" + entry.relpath
        if entry.link_target is not None:
            members.append(Member(name, "symlink", link_target=entry.link_target))
        elif entry.data is not None:
            members.append(Member(name, "bytes", data=entry.data))
        else:
            members.append(
                Member(name, "file", path=entry.path, executable=entry.executable, expected_digest=entry.digest)
            )
    return with_parent_dirs(members, prefix="./")


def build_release(
    release_dir: Path | str = ".",
    out_dir: Path | str | None = None,
    *,
    version: str | None = None,
    tarball: Path | str | None = None,
) -> BuildResult:
    """Check, fingerprint and archive the release in `release_dir`.

    The tarball goes to `tarball` if given, else to out_dir/<name>-<version>.tgz (out_dir
    defaults to <release_dir>/dev_releases)."""
    release_dir = Path(release_dir).resolve()
    definition = load_definition(release_dir)
    # Missing blobs first: on a fresh clone that is the one thing to do, and it has a command.
    warnings = vendor.check_vendored(release_dir, definition)
    contents = read_release(release_dir, definition)
    warnings += contents.warnings
    if version is not None:
        try:
            check_version(version)
        except ValueError as exc:
            raise ReleaseError(str(exc)) from None
    version = version or definition.version

    if tarball is None:
        out = Path(out_dir) if out_dir is not None else release_dir / "dev_releases"
        tarball = out / f"{definition.name}-{version}.tgz"
    tarball = Path(tarball).absolute()
    tarball.parent.mkdir(parents=True, exist_ok=True)
    mtime = archive_mtime()

    with tempfile.TemporaryDirectory(prefix=".cpi-release-", dir=tarball.parent) as tmp:
        staging = Path(tmp)
        manifest, outer = _write_parts(contents, staging, version, mtime)
        partial = staging / "release.tgz"
        digest = write_archive(partial, outer, compress=not definition.no_compression, mtime=mtime)
        os.replace(partial, tarball)
    return BuildResult(tarball, digest, tarball.stat().st_size, manifest, warnings)


def _pack(staging: Path, name: str, entries: list[Entry], compress: bool, mtime: int, outer: list[Member]) -> str:
    """Write the inner archive `name` (a job's, a package's or the licence's) under
    `staging`, add it to the outer archive's members, and return its digest for release.MF."""
    path = staging / name
    digest = write_archive(path, _members(entries), compress=compress, mtime=mtime)
    outer.append(Member(name, "file", path=path))
    return digest


def _write_parts(
    contents: ReleaseContents, staging: Path, version: str, mtime: int
) -> tuple[ReleaseManifest, list[Member]]:
    """Write each job, package and license archive into `staging`; return the manifest
    and the outer archive's members."""
    (staging / "jobs").mkdir()
    (staging / "packages").mkdir()
    # bosh-cli's order: release.MF, jobs/, packages/, license.tgz, the loose license files.
    outer: list[Member] = [Member("jobs/", "dir")]

    job_refs = []
    for job in contents.jobs:
        digest = _pack(staging, f"jobs/{job.name}.tgz", job.entries, True, mtime, outer)
        job_refs.append(
            JobRef(name=job.name, version=job.fingerprint, fingerprint=job.fingerprint, sha1=digest,
                   packages=job.spec.packages)
        )

    outer.append(Member("packages/", "dir"))
    package_refs = []
    for package in contents.packages:
        compress = not package.spec.no_compression
        digest = _pack(staging, f"packages/{package.name}.tgz", package.entries, compress, mtime, outer)
        package_refs.append(
            PackageRef(name=package.name, version=package.fingerprint, fingerprint=package.fingerprint,
                       sha1=digest, dependencies=package.spec.dependencies)
        )

    license_ref = None
    if contents.license is not None:
        digest = _pack(staging, "license.tgz", contents.license.entries, True, mtime, outer)
        fp = contents.license.fingerprint
        license_ref = LicenseRef(version=fp, fingerprint=fp, sha1=digest)
        for entry in contents.license.entries:
            outer.append(Member(entry.relpath, "file", path=entry.path, expected_digest=entry.digest))
    outer.append(Member(sbom.MEMBER, "bytes", data=sbom.document(contents, version)))

    manifest = ReleaseManifest(
        name=contents.definition.name,
        version=version,
        commit_hash=gitinfo.commit_hash(contents.release_dir),
        uncommitted_changes=gitinfo.has_uncommitted_changes(contents.release_dir),
        jobs=job_refs,
        packages=package_refs,
        license=license_ref,
        no_compression=contents.definition.no_compression,
    )
    outer.insert(0, Member("release.MF", "bytes", data=manifest.to_yaml().encode()))
    return manifest, outer


def describe(result: BuildResult) -> str:
    """A summary like `bosh create-release` prints."""
    manifest = result.manifest
    lines = [
        f"Name         {manifest.name}",
        f"Version      {manifest.version}",
        f"Commit Hash  {manifest.commit_hash}{'+' if manifest.uncommitted_changes else ''}",
        "",
        "Job                                                                   Digest",
    ]
    for job in manifest.jobs:
        lines.append(f"{job.name}/{job.fingerprint}  {job.sha1}")
    lines += ["", "Package                                                               Digest"]
    for package in manifest.packages:
        lines.append(f"{package.name}/{package.fingerprint}  {package.sha1}")
    if manifest.license:
        lines += ["", f"License      {manifest.license.fingerprint}  {manifest.license.sha1}"]
    lines += [
        "",
        f"Tarball      {result.tarball}",
        f"Size         {result.size / 1e6:.1f} MB",
        f"Digest       {result.sha256}",
    ]
    return "\n".join(lines)
