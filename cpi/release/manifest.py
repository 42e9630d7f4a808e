"""release.MF: the manifest at the top of a release tarball.

Field names and order follow bosh-cli's release/manifest struct, which is what
`bosh inspect-local-release`, create-env and the director read. `version` repeats
`fingerprint` (a deprecated alias they still read) and `sha1` holds the archive digest in
the current `sha256:<hex>` form.
"""

from __future__ import annotations

import yaml
from pydantic import BaseModel, Field


class JobRef(BaseModel):
    name: str
    version: str
    fingerprint: str
    sha1: str
    packages: list[str] = Field(default_factory=list)


class PackageRef(BaseModel):
    name: str
    version: str
    fingerprint: str
    sha1: str
    dependencies: list[str] = Field(default_factory=list)


class LicenseRef(BaseModel):
    version: str
    fingerprint: str
    sha1: str


class ReleaseManifest(BaseModel):
    name: str
    version: str
    commit_hash: str
    uncommitted_changes: bool
    jobs: list[JobRef] = Field(default_factory=list)
    packages: list[PackageRef] = Field(default_factory=list)
    license: LicenseRef | None = None
    no_compression: bool = False

    def to_yaml(self) -> str:
        data = self.model_dump()
        # bosh-cli omits these when empty (`omitempty`).
        for key in ("jobs", "packages", "license"):
            if not data[key]:
                del data[key]
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)

    @classmethod
    def from_yaml(cls, text: str) -> ReleaseManifest:
        return cls.model_validate(yaml.safe_load(text))
