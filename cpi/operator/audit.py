"""Queries of the audit trail, which the calls write through cpi.audit: which file and
account a cpi.json's calls write to, and the lines about one account, deployment, request,
resource, action or time span (`cpi audit`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

    from cpi.audit import Snapshot

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str, now: datetime | None = None, option: str = "--since") -> datetime:
    """An ISO 8601 time, or an age (30m, 2h, 7d) back from `now`: an operator looking at
    what just happened thinks in ages. A time without a zone is UTC, as the trail's are.
    `option` names the flag in the error (--since, --before)."""
    now = now or datetime.now(UTC)
    match = _DURATION.fullmatch(text.strip().lower())
    if match:
        return now - timedelta(seconds=float(match.group(1)) * _SECONDS[match.group(2)])
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{option}: '{text}' is neither an ISO 8601 time nor an age such as 30m, 2h or 7d") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _time(entry: dict[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(entry.get("time", "")).replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass(frozen=True)
class Trail:
    """Where a cpi.json's calls write their lines, and the cloud and account those lines
    name (as the calls' Redactor wrote it: a config's secret is masked there, and so here)."""

    path: Path
    cloud: str
    account: str | None


def trail(config_path: str | None) -> Trail:
    """The trail and account of this cpi.json (its audit settings, or its cloud's own
    place), worked out offline as the calls do (cpi.audit.account_of): the lines to read
    without the operator having to know where they are or how the account is spelt."""
    from cpi import audit, config, logs

    raw = config.read_file(str(Path(config_path).expanduser().resolve()) if config_path else None)
    redactor = logs.redactor_for(raw)  # before building it: its errors are masked
    cfg = config.build(raw)
    account = audit.account_of(cfg)
    if account is not None:
        account = redactor.text(account)
    return Trail(audit.default_path(cfg), cfg.plugin, account)


def select(source: Path | Snapshot, *, request_id: str | None = None, resource: str | None = None,
           action: str | None = None, since: datetime | None = None, before: datetime | None = None,
           deployment: str | None = None, scope: tuple[str, str | None] | None = None) -> Iterator[dict[str, Any]]:
    """The trail's lines (rotated files included, oldest first) that match every filter
    given, one at a time as they are read: a million-line trail is never held (the caller
    that reads it twice passes one cpi.audit.Snapshot, so both passes see the same lines).
    A line whose time cannot be read never matches `since` or `before`.

    `scope` (cloud, account): only that account's lines, so never a line written before
    lines named their account. `deployment`: the lines that name it, and every line about a
    resource one of them is about (a VM's create before its set_vm_metadata, its delete
    after): see `tied`."""
    from cpi import audit

    if not isinstance(source, audit.Snapshot):
        with audit.Snapshot(source) as snapshot:
            yield from select(snapshot, request_id=request_id, resource=resource, action=action, since=since,
                              before=before, deployment=deployment, scope=scope)
        return
    # the values' own bytes first: a line without them is never decoded. The rarest first
    # (a request id, a resource), the cloud and account last: nearly every line has them
    scoped = _scope_needles(scope)
    needles = tuple(audit.needle(value) for value in (request_id, resource, action) if value)
    accept = None
    if deployment:
        ties = tied(source, deployment, scoped)
        tied_ids = {resource_id for _, _, resource_id in ties}
        named = _deployment_needle(deployment)

        def accept(raw: bytes) -> bool:
            return ((named in raw or audit.resource_bytes(raw) in tied_ids)
                    and all(needle in raw for needle in scoped))
    else:
        needles += scoped

    for entry in audit.read(source, needles, audit.time_bytes(since) if since is not None else None,
                            audit.time_bytes(before) if before is not None else None, accept):
        if scope is not None and not _in_scope(entry, scope):
            continue
        if request_id and entry.get("request_id") != request_id:
            continue
        if resource and entry.get("resource_id") != resource:
            continue
        if action and entry.get("action") != action:
            continue
        if deployment and entry.get("deployment") != deployment and _resource(entry) not in ties:
            continue
        if since is not None or before is not None:
            when = _time(entry)
            if when is None or (since is not None and when < since) or (before is not None and when >= before):
                continue
        yield entry


def tied(source: Path | Snapshot, deployment: str, needles: tuple[bytes, ...] = ()) -> set[tuple[Any, Any, bytes]]:
    """The resources (cloud, account, id as lines spell it: cpi.audit.needle) that a line
    naming `deployment` is about: the VMs, disks and snapshots its set_vm_metadata,
    set_disk_metadata and snapshot_disk calls touched. An account never gives two resources
    one id, so every line about one of them, before or after, belongs to the deployment:
    the whole trail is read for them (a --since does not hide an older tie), only the lines
    holding the deployment's name decoded."""
    from cpi import audit

    found = set()
    for entry in audit.read(source, (_deployment_needle(deployment), *needles)):
        if entry.get("deployment") == deployment and entry.get("resource_id") is not None:
            found.add(_resource(entry))
    return found


def _resource(entry: dict[str, Any]) -> tuple[Any, Any, bytes]:
    from cpi import audit

    return entry.get("cloud"), entry.get("account"), audit.needle(entry.get("resource_id"))


def _in_scope(entry: dict[str, Any], scope: tuple[str, str | None]) -> bool:
    """A line of this cloud and account; a line without the `account` field (written before
    lines named it) is in no account's scope, a null one in that of a cloud without accounts."""
    return entry.get("cloud") == scope[0] and "account" in entry and entry["account"] == scope[1]


def _deployment_needle(deployment: str) -> bytes:
    from cpi import audit

    return b'"deployment": ' + audit.needle(deployment)


def _scope_needles(scope: tuple[str, str | None] | None) -> tuple[bytes, ...]:
    """What a line of this cloud and account holds (a null account: its cloud only)."""
    from cpi import audit

    if scope is None:
        return ()
    cloud, account = scope
    return b'"cloud": ' + audit.needle(cloud), b'"account": ' + audit.needle(account)
