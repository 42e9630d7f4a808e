"""Queries of the audit trail, which the calls write through cpi.audit: which file a
cpi.json's calls write to, and the lines about one request, resource, action or time span
(`cpi audit`)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """An ISO 8601 time, or an age (30m, 2h, 7d) back from `now`: an operator looking at
    what just happened thinks in ages. A time without a zone is UTC, as the trail's are."""
    now = now or datetime.now(UTC)
    match = _DURATION.fullmatch(text.strip().lower())
    if match:
        return now - timedelta(seconds=float(match.group(1)) * _SECONDS[match.group(2)])
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"--since: '{text}' is neither an ISO 8601 time nor an age such as 30m, 2h or 7d") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _time(entry: dict[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(entry.get("time", "")).replace("Z", "+00:00"))
    except ValueError:
        return None


def trail_path(config_path: str | None) -> Path:
    """The trail the calls of this cpi.json write (its audit settings, or its cloud's own
    place): the one to read without the operator having to know where it is."""
    from cpi import audit, config

    raw = config.read_file(str(Path(config_path).expanduser().resolve()) if config_path else None)
    return audit.default_path(config.build(raw))


def select(path: Path, *, request_id: str | None = None, resource: str | None = None, action: str | None = None,
           since: datetime | None = None) -> list[dict[str, Any]]:
    """The trail's lines (rotated files included, oldest first) that match every filter
    given; a line whose time cannot be read never matches `since`."""
    from cpi import audit

    # the values' own bytes first: a line without them is never decoded
    needles = tuple(audit.needle(value) for value in (request_id, resource, action) if value)
    entries = []
    for entry in audit.read(path, needles, audit.time_bytes(since) if since is not None else None):
        if request_id and entry.get("request_id") != request_id:
            continue
        if resource and entry.get("resource_id") != resource:
            continue
        if action and entry.get("action") != action:
            continue
        if since is not None:
            when = _time(entry)
            if when is None or when < since:
                continue
        entries.append(entry)
    return entries
