"""requirements.lock: the one list of exact versions every install of this project comes from.

bin/bootstrap installs the whole lock into .venv (`pip --require-hashes`), and `cpi release
vendor` downloads the runtime part of it into the release's blobs, checking each wheel's
sha256 against the lock and writing only locked lines into wheels/requirements.txt, which
package cpi installs with `--require-hashes` again. So a director's compile VM, an
operator's `create-env`, CI and a developer's venv install the same bytes on any day.
bin/lock (uv, run by a maintainer) is the only thing that writes it.

This reader knows the subset of pip's requirements format that the lock uses: one
`name==version[ ; marker]` per entry, `--hash=sha256:...` options on continuation lines,
comments, of which it keeps uv's `# via` annotations (who requires the entry: the lock's
only record of the dependency graph, from which cpi/release/lockfiles.py finds the runtime
closure). It evaluates no marker: pip does that, for the machine that installs.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from cpi.release.errors import ReleaseError, read_text

LOCK = "requirements.lock"
UPDATE = "run bin/lock (a maintainer's command) and commit requirements.lock"
_ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)\s*(?:;\s*(.+?))?\s*$")
_HASH = re.compile(r"^--hash=sha256:([0-9a-f]{64})$")


def canonical(name: str) -> str:
    """A distribution name as PEP 503 compares them (`PyYAML`, `pyyaml` and `py_yaml` alike)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Pin:
    """One locked distribution: its exact version, the marker saying where it applies
    (None: everywhere), the sha256 of every file of it the lock accepts, and the canonical
    names of what requires it (uv's `# via`; the project itself for its direct ones)."""

    name: str
    version: str
    marker: str | None
    hashes: frozenset[str]
    required_by: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def key(self) -> str:
        return canonical(self.name)

    def line(self, hashes: frozenset[str] | None = None) -> str:
        """The pip requirements line for this pin, accepting `hashes` (default: all)."""
        marker = f" ; {self.marker}" if self.marker else ""
        options = "".join(f" --hash=sha256:{h}" for h in sorted(self.hashes if hashes is None else hashes))
        return f"{self.name}=={self.version}{marker}{options}"

    def constraint(self) -> str:
        """The same without hashes: what `pip download --constraint` reads."""
        return f"{self.name}=={self.version}" + (f" ; {self.marker}" if self.marker else "")


def lock_path(root: Path) -> Path:
    return root / LOCK


def parse(text: str, source: str = LOCK) -> list[Pin]:
    """The pins of a lock's text; a line it does not understand is an error naming it."""
    pins: list[Pin] = []
    current: tuple[str, str, str | None] | None = None
    hashes: set[str] = set()
    required_by: set[str] = set()
    in_via = False

    def close() -> None:
        if current:
            pins.append(Pin(current[0], current[1], current[2], frozenset(hashes), frozenset(required_by)))

    for number, raw in enumerate(_logical_lines(text), start=1):
        if raw.lstrip().startswith("#"):
            comment = raw.strip().lstrip("#").strip()
            if current and (comment == "via" or comment.startswith("via ")):
                in_via, comment = True, comment[3:].strip()
            if current and in_via and comment:  # `# via a` or, one per line, `#   a`
                required_by.add(canonical(comment.split()[0]))
            continue
        line = raw.split(" #", 1)[0].strip()
        if not line:
            continue
        tokens = line.split(" --hash=")
        head, options = tokens[0].strip(), ["--hash=" + t.strip() for t in tokens[1:]]
        if head.startswith("--hash="):
            options.insert(0, head)
            head = ""
        if head:
            match = _ENTRY.match(head)
            if not match:
                raise ReleaseError(f"{source}: entry {number} is not `name==version[ ; marker]`: {head!r}")
            close()
            current, hashes, required_by, in_via = (match.group(1), match.group(2), match.group(3)), set(), set(), False
        for option in options:
            found = _HASH.match(option)
            if not found or current is None:
                raise ReleaseError(f"{source}: entry {number}: not a sha256 hash of a pinned entry: {option!r}")
            hashes.add(found.group(1))
    close()
    unhashed = [p.name for p in pins if not p.hashes]
    if unhashed:
        raise ReleaseError(f"{source}: {', '.join(unhashed)} without a --hash: {UPDATE}")
    return pins


def _logical_lines(text: str) -> list[str]:
    """Lines with their backslash continuations joined, as pip reads them."""
    joined, pending = [], ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    if pending:
        joined.append(pending)
    return joined


def read(root: Path) -> list[Pin]:
    path = lock_path(root)
    return parse(read_text(path, f"every install comes from it ({UPDATE})"), str(path))


def digest(root: Path) -> str:
    """sha256 of the lock file: a vendored release names the lock it was downloaded from."""
    try:
        return hashlib.sha256(lock_path(root).read_bytes()).hexdigest()
    except FileNotFoundError:
        raise ReleaseError(f"{lock_path(root)}: not found; every install comes from it ({UPDATE})") from None


def by_version(pins: list[Pin]) -> dict[tuple[str, str], Pin]:
    return {(pin.key, pin.version): pin for pin in pins}


def project_requirements(release_dir: Path) -> list[str]:
    """The runtime requirements in pyproject.toml ([project] dependencies): what `cpi release
    vendor` downloads the locked closure of."""
    path = release_dir / "pyproject.toml"
    text = read_text(path, "the wheels to vendor are its [project] dependencies")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ReleaseError(f"{path}: not valid TOML: {exc}") from None
    requirements = data.get("project", {}).get("dependencies")
    if not isinstance(requirements, list) or not all(isinstance(r, str) for r in requirements):
        raise ReleaseError(f"{path}: [project] dependencies must be a list of requirement strings")
    return requirements
