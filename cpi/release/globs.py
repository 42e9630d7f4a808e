"""Package `files` globs, matched the way bosh-cli matches them.

bosh-cli expands each pattern with the doublestar library under each source root and keeps
what it calls packageable files. Python's glob differs on the points that decide what goes
into a package, so this module follows doublestar instead:

- `*`, `?` and `[...]` never cross a `/`, and they match names starting with a dot;
- `**` as a whole path segment matches zero or more directories (`cpi/**/*` includes
  `cpi/x.py`); as the last segment it matches everything below;
- `{a,b}` alternatives, and `\\` escapes;
- directories are never packaged themselves, only the files under them;
- a symlink is packaged as a symlink (to a file or a directory alike);
- files reached through a symlinked directory are skipped, as bosh-cli does.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

from cpi.release.errors import ReleaseError

_WILDCARDS = set("*?[{\\")


def _check_pattern(pattern: str) -> str:
    if not pattern or pattern.startswith("/") or ".." in pattern.split("/"):
        raise ReleaseError(f"file pattern {pattern!r} must be a relative path without '..'")
    while pattern.startswith("./"):
        pattern = pattern[2:]
    return pattern


def _split_alternatives(body: str) -> list[str]:
    """Split a `{...}` body on top-level commas (nested braces stay together)."""
    parts, depth, current = [], 0, ""
    for char in body:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += char == "{"
        depth -= char == "}"
        current += char
    parts.append(current)
    return parts


def _matching_brace(segment: str, start: int) -> int:
    depth = 0
    for index in range(start, len(segment)):
        if segment[index] == "\\":
            continue
        if segment[index] == "{":
            depth += 1
        elif segment[index] == "}":
            depth -= 1
            if depth == 0:
                return index
    return -1


def _segment_regex(segment: str) -> str:
    """Regex for one path segment (no `/` in it)."""
    out, index = [], 0
    while index < len(segment):
        char = segment[index]
        if char == "\\" and index + 1 < len(segment):
            out.append(re.escape(segment[index + 1]))
            index += 2
            continue
        if char == "*":
            while index + 1 < len(segment) and segment[index + 1] == "*":
                index += 1  # `**` inside a segment is just `*`
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = segment.find("]", index + 2 if segment[index + 1 : index + 2] in ("!", "^") else index + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = segment[index + 1 : end]
                negate = body[:1] in ("!", "^")
                if negate:
                    body = body[1:]
                body = body.replace("\\", "\\\\")
                out.append(f"[{'^/' if negate else ''}{body}]")
                index = end
        elif char == "{":
            end = _matching_brace(segment, index)
            if end == -1:
                out.append(re.escape(char))
            else:
                alternatives = _split_alternatives(segment[index + 1 : end])
                out.append("(?:" + "|".join(_segment_regex(alt) for alt in alternatives) + ")")
                index = end
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


@lru_cache(maxsize=256)
def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The regex a relative path (with `/` separators) must fully match."""
    pattern = _check_pattern(pattern)
    segments = pattern.split("/")
    out = []
    for position, segment in enumerate(segments):
        last = position == len(segments) - 1
        if segment == "**":
            out.append(r"[^/]+(?:/[^/]+)*" if last else r"(?:[^/]+/)*")
        else:
            out.append(_segment_regex(segment) + ("" if last else "/"))
    return re.compile("".join(out))


def literal_prefix(pattern: str) -> str:
    """The leading directories of `pattern` that hold no wildcard: where a walk can start."""
    segments = _check_pattern(pattern).split("/")
    literal = []
    for segment in segments[:-1]:
        if _WILDCARDS & set(segment):
            break
        literal.append(segment)
    return "/".join(literal)


def _is_under_symlinked_dir(root: Path, relative_dir: str) -> bool:
    if not relative_dir:
        return False
    return os.path.realpath(root / relative_dir) != os.path.join(os.path.realpath(root), relative_dir)


def match(root: Path, pattern: str) -> list[str]:
    """Relative paths (sorted, `/`-separated) under `root` of the packageable files that
    `pattern` matches: regular files and symlinks, not directories."""
    pattern = _check_pattern(pattern)
    if not _WILDCARDS & set(pattern):
        candidate = root / pattern
        parent = os.path.dirname(pattern)
        if (candidate.is_symlink() or candidate.is_file()) and not _is_under_symlinked_dir(root, parent):
            return [pattern]
        return []
    regex = compile_pattern(pattern)
    prefix = literal_prefix(pattern)
    start = root / prefix if prefix else root
    if not start.is_dir() or _is_under_symlinked_dir(root, prefix):
        return []
    segments = pattern.split("/")
    # Without `**` a pattern has a fixed depth: do not walk below it (the root may be the
    # whole project, .git and virtualenvs included).
    max_depth = None if "**" in segments else len(segments) - 1 - (len(prefix.split("/")) if prefix else 0)
    found = []
    for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
        relative_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        relative_dir = "" if relative_dir == "." else relative_dir
        names = list(filenames)
        # os.walk lists symlinks to directories with the directories; they are packageable.
        names += [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in names:
            relative = f"{relative_dir}/{name}" if relative_dir else name
            if regex.fullmatch(relative):
                found.append(relative)
        if max_depth is not None:
            depth = 0 if dirpath == str(start) else os.path.relpath(dirpath, start).count(os.sep) + 1
            if depth >= max_depth:
                dirnames[:] = []
    return sorted(found)
