"""The release's bill of materials: a CycloneDX 1.5 JSON document naming every file of
third-party code the release installs (each vendored wheel and the CPython source), with
its version, licence and the sha256 the compile host checks before it installs it
(wheels/SHA256SUMS for the wheels).

It goes into the release tarball as `sbom.cdx.json`, at the top beside the loose licence
files (bosh-cli and the director read release.MF and the archives it names, nothing else).
Reproducible like the rest of the build: no timestamp, components sorted, and the serial
number a UUID derived from the content, so that two builds of the same inputs carry the
same bytes.
"""

from __future__ import annotations

import json
import re
import uuid
import zipfile
from email.parser import HeaderParser
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from cpi.release.fingerprint import Entry
    from cpi.release.reader import ReleaseContents

#: Where the document sits in the release tarball.
MEMBER = "sbom.cdx.json"
SPEC_VERSION = "1.5"
#: The most of a wheel's METADATA read (bytes): it is a header block and a description.
METADATA_LIMIT = 1 << 20
#: The licence of CPython's source, as SPDX names it.
CPYTHON_LICENSE = "PSF-2.0"
CPYTHON = re.compile(r"^Python-(?P<version>\d+\.\d+\.\d+)\.(tgz|tar\.xz|tar\.gz)$")


def _checked_sums(package: Any) -> dict[str, str]:
    """wheels/SHA256SUMS of package `cpi`: relpath under wheels/ -> sha256 hex (the build
    has checked it against every wheel by now)."""
    from cpi.release import checksums

    entry = next((e for e in package.entries if e.relpath == "wheels/SHA256SUMS"), None)
    return {} if entry is None else checksums.parse(entry.path.read_text())


def _licenses(path: Any) -> list[dict[str, Any]]:
    """A wheel's licence as its METADATA declares it: `License-Expression` (PEP 639), else
    the `License ::` classifiers, else the first line of `License`; none when the wheel
    says nothing or cannot be read."""
    try:
        with zipfile.ZipFile(path) as wheel:
            name = next((n for n in wheel.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1),
                        None)
            if name is None:
                return []
            with wheel.open(name) as handle:
                text = handle.read(METADATA_LIMIT).decode("utf-8", "replace")
    except (OSError, zipfile.BadZipFile, KeyError):
        return []
    headers = HeaderParser().parsestr(text.split("\n\n", 1)[0] + "\n\n")
    expression = (headers.get("License-Expression") or "").strip()
    if expression:
        return [{"expression": expression}]
    classified = [c.split("::")[-1].strip() for c in headers.get_all("Classifier") or [] if c.startswith("License ::")]
    classified = [c for c in classified if c != "OSI Approved"]
    if classified:
        return [{"license": {"name": name}} for name in sorted(set(classified))]
    declared = (headers.get("License") or "").strip().splitlines()
    if declared and declared[0].strip() and declared[0].strip().upper() != "UNKNOWN":
        return [{"license": {"name": declared[0].strip()[:200]}}]
    return []


def _wheel(entry: Entry, sha256: str) -> dict[str, Any]:
    """A wheel's component: its distribution and version are the first two fields of its
    file name (PEP 427 escapes a "-" in either)."""
    file_name = entry.relpath.rsplit("/", 1)[-1]
    distribution, _, rest = file_name.partition("-")
    version = rest.partition("-")[0]
    name = distribution.replace("_", "-").lower()
    component: dict[str, Any] = {
        "type": "library", "bom-ref": entry.relpath, "name": name, "version": version,
        "hashes": [{"alg": "SHA-256", "content": sha256}],
        "purl": f"pkg:pypi/{name}@{version}?file_name={file_name}",
        "properties": [{"name": "bosh:package", "value": "cpi"}, {"name": "bosh:path", "value": entry.relpath}],
    }
    licenses = _licenses(entry.path)
    if licenses:
        component["licenses"] = licenses
    return component


def _cpython(entry: Entry) -> dict[str, Any] | None:
    match = CPYTHON.match(entry.relpath.rsplit("/", 1)[-1])
    if match is None:
        return None
    return {
        "type": "application", "bom-ref": entry.relpath, "name": "cpython", "version": match["version"],
        "hashes": [{"alg": "SHA-256", "content": entry.digest.removeprefix("sha256:")}],
        "licenses": [{"license": {"id": CPYTHON_LICENSE}}],
        "purl": f"pkg:generic/cpython@{match['version']}",
        "properties": [{"name": "bosh:package", "value": "python3"}, {"name": "bosh:path", "value": entry.relpath}],
    }


def components(contents: ReleaseContents) -> list[dict[str, Any]]:
    """Every vendored wheel of package `cpi` (its sha256 as SHA256SUMS lists it, which the
    compile host checks) and the CPython source of package `python3`, sorted by path."""
    found: list[dict[str, Any]] = []
    for package in contents.packages:
        sums = _checked_sums(package)
        for entry in package.entries:
            component: dict[str, Any] | None = None
            if entry.relpath.startswith("wheels/") and entry.relpath.endswith(".whl"):
                checked = sums.get(entry.relpath.removeprefix("wheels/"), entry.digest.removeprefix("sha256:"))
                component = _wheel(entry, checked)
            elif package.name == "python3":
                component = _cpython(entry)
            if component is not None:
                found.append(component)
    return sorted(found, key=lambda c: c["bom-ref"])


def document(contents: ReleaseContents, version: str) -> bytes:
    """The SBOM of the release being built, as bytes: the same inputs give the same bytes."""
    name = contents.definition.name
    body: dict[str, Any] = {
        "bomFormat": "CycloneDX", "specVersion": SPEC_VERSION, "version": 1,
        "metadata": {"component": {"type": "application", "bom-ref": f"{name}@{version}", "name": name,
                                   "version": version}},
        "components": components(contents),
    }
    content = json.dumps(body, sort_keys=True).encode()
    serial = uuid.uuid5(uuid.NAMESPACE_URL, "sbom:" + content.decode())
    return (json.dumps({"serialNumber": f"urn:uuid:{serial}", **body}, indent=2) + "\n").encode()


#: The most of a tarball's SBOM read (bytes): a few hundred components take ~200 KiB.
READ_LIMIT = 16 << 20


def read_from(tarball: Path) -> bytes:
    """The SBOM inside a built release tarball; a ReleaseError when there is none."""
    import tarfile

    from cpi.release.errors import ReleaseError

    try:
        with tarfile.open(tarball, "r:*") as archive:
            member = archive.getmember(MEMBER)
            if not member.isfile() or member.size > READ_LIMIT:
                raise ReleaseError(f"{tarball}: {MEMBER} is not a file of at most {READ_LIMIT >> 20} MiB")
            handle = archive.extractfile(member)
            assert handle is not None  # a regular file
            return handle.read(READ_LIMIT)
    except KeyError:
        raise ReleaseError(f"{tarball} holds no {MEMBER} (a release built before the SBOM was added)") from None
    except (OSError, tarfile.TarError) as exc:
        raise ReleaseError(f"cannot read {tarball}: {exc}") from None


def _cell(value: object) -> str:
    """A value of a tarball someone else may have built, safe on a terminal: anything but
    printable ASCII written as JSON escapes it (ESC, a newline, U+202E)."""
    text = str(value)
    return text if text.isascii() and text.isprintable() else json.dumps(text)[1:-1]


def pretty(data: bytes) -> str:
    """The document as `cpi release sbom` prints it: parsed and written again, every
    character past ASCII escaped, so nothing in a file of unknown origin reaches a terminal raw."""
    return json.dumps(json.loads(data), indent=2)


def table(data: bytes) -> str:
    """One line per component: name, version, licence, the head of its sha256, its path."""
    rows = []
    for component in json.loads(data).get("components", []):
        licenses = component.get("licenses") or []
        licence = ", ".join(str(item.get("expression") or item.get("license", {}).get("id")
                                or item.get("license", {}).get("name", "?")) for item in licenses) or "-"
        sha256 = next((h["content"] for h in component.get("hashes", []) if h.get("alg") == "SHA-256"), "-")
        rows.append([_cell(v) for v in (component.get("name"), component.get("version"), licence,
                                         str(sha256)[:16], component.get("bom-ref"))])
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, [*widths, 0], strict=True)).rstrip()
                     for row in rows)
