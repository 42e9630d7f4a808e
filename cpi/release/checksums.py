"""wheels/SHA256SUMS: the sha256 of every vendored file, checked before anything runs from one.

Package cpi installs its dependencies with pip, and pip itself runs from a vendored wheel:
`pip --require-hashes` checks the wheels it installs, but nothing checked the pip wheel
before its code ran on the compile host. So `cpi release vendor` writes SHA256SUMS beside
the wheels (sha256sum's format, one `sha256  relative path` line per file: every wheel,
pip's included, and requirements.txt), `cpi release build` checks it against the files and
requirements.lock before packing them (cpi/release/vendor.py), and packages/cpi/packaging
runs this file with package python3 before pip, so a file that differs, is missing or was
added stops the compile, named, before any code of a wheel runs:

    python3 -I cpi/release/checksums.py WHEELS_DIR

Standard library only, and no import of the rest of `cpi`: package python3 runs it before
the venv (or anything from a wheel) exists.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

SUMS = "SHA256SUMS"
CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def files(wheels_dir: Path) -> list[str]:
    """Every entry under `wheels_dir` but SHA256SUMS and the directories, as relative
    POSIX paths; a symlink or other non-regular file counts as a file (and so is either
    listed or a stray)."""
    return sorted(
        path.relative_to(wheels_dir).as_posix()
        for path in wheels_dir.rglob("*")
        if (path.is_symlink() or not path.is_dir()) and path.relative_to(wheels_dir).as_posix() != SUMS
    )


def render(sums: dict[str, str]) -> str:
    return "".join(f"{sha256}  {name}\n" for name, sha256 in sorted(sums.items()))


def write(wheels_dir: Path) -> None:
    """SHA256SUMS for every file now under `wheels_dir` (`cpi release vendor`'s last step)."""
    sums = {name: sha256_file(wheels_dir / name) for name in files(wheels_dir)}
    (wheels_dir / SUMS).write_text(render(sums))


def parse(text: str) -> dict[str, str]:
    """relative path -> sha256; a line that is not `<64 hex>  <path>` is an error."""
    sums = {}
    for number, line in enumerate(text.splitlines(), start=1):
        sha256, separator, name = line.partition("  ")
        if not separator or len(sha256) != 64 or not all(c in "0123456789abcdef" for c in sha256) or not name:
            raise ValueError(f"{SUMS} line {number} is not `sha256  path`: {line[:200]!r}")
        sums[name] = sha256
    return sums


def problems(wheels_dir: Path) -> list[str]:
    """What differs between `wheels_dir` and its SHA256SUMS: each file whose sha256 differs
    (with both hashes), each listed file that is missing or not a regular file, and each
    file that is not listed."""
    sums_path = wheels_dir / SUMS
    try:
        sums = parse(sums_path.read_text())
    except FileNotFoundError:
        return [f"{sums_path} is missing"]
    except (ValueError, UnicodeDecodeError) as exc:
        return [f"{sums_path}: {exc}"]
    found = []
    present = files(wheels_dir)
    for name in present:
        path = wheels_dir / name
        if name not in sums:
            found.append(f"{path} is not listed in {SUMS}")
        elif path.is_symlink() or not path.is_file():
            found.append(f"{path} is not a regular file")
        else:
            actual = sha256_file(path)
            if actual != sums[name]:
                found.append(f"{path}: sha256 {actual}, but {SUMS} has {sums[name]}")
    found += [f"{wheels_dir / name} is listed in {SUMS} but missing" for name in sorted(set(sums) - set(present))]
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python3 -I checksums.py WHEELS_DIR", file=sys.stderr)
        return 2
    found = problems(Path(argv[0]))
    for problem in found:
        print(f"package cpi: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
