"""The two git facts release.MF records: the commit built, and whether the tree was dirty.

Same answers as bosh-cli: the short HEAD sha, "non-git" outside a repository and "empty"
in one without commits; uncommitted changes when `git status --porcelain` lists anything
(ignored files, such as blobs/, do not count).
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def _git(release_dir: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(["git", *args], cwd=release_dir, capture_output=True, text=True, timeout=60,  # nosec B607
                              check=False)  # (the maintainer's git from PATH: only a release build runs it)
    except FileNotFoundError:
        return None  # no git installed: same as not a repository


def commit_hash(release_dir: Path) -> str:
    result = _git(release_dir, "rev-parse", "--short", "HEAD")
    if result is None or "not a git repository" in result.stderr.lower():
        return "non-git"
    if result.returncode != 0:
        # A repository whose HEAD names no commit yet.
        return "empty"
    return result.stdout.strip()


def has_uncommitted_changes(release_dir: Path) -> bool:
    result = _git(release_dir, "status", "--porcelain=1")
    if result is None or result.returncode != 0:
        return False
    return bool(result.stdout.strip())
