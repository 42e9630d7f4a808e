"""The audit trail: one JSON line per IaaS mutation made by any CPI call.

Each line holds the time (UTC), the call's request_id, director_uuid, CPI method, cloud
and account (`account_of`), the deployment when the call names it (`deployment_of`), the
action (create, delete, attach, detach, tag, resize, associate, reboot, ...), the
resource's type and id, and the `changes` in the Salt state shape `{"old", "new"}`.

- The call's context is set once per call (`begin`, from api.dispatch); `record` is a
  no-op outside a call (a cloud used in-process by a test or a tool that did not `start`).
- A line is written with one `os.write` to a file opened O_APPEND|O_NOFOLLOW, 0600, under
  an flock on that file, so any number of parallel CPI processes never tear or interleave
  a line. A line is at most MAX_LINE bytes: long values are shortened, a write never split.
- Rotation by size: when a line would take the file past `max_bytes`, the holder of the
  lock renames audit.log -> .1 -> .2 ... (keeping `keep`); a process that was waiting on
  the old file sees it was rotated away and opens the new one, so nothing rotates twice.
  A line is stamped under the lock, and a clock set back rotates too: each file is in
  time order, so a query by time seeks (`read`) instead of reading every line.
- Reading (`read`, `Snapshot`) holds one chunk and one line at a time, never the trail.
- Never a secret: keys that look secret are dropped and every string goes through the
  call's Redactor (cpi.logs.active).
- A write that fails never fails the CPI call: it is a warning in the call's log.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from pydantic import BaseModel, ConfigDict, Field

from cpi import logs, private

from . import appending
from .appending import TIME_END, TIME_PREFIX, time_of

if TYPE_CHECKING:
    from cpi.plan import Plan

log = logging.getLogger("cpi.audit")

#: The setting that chooses the file, as errors name it.
PATH_SETTING = "cloud.properties.audit.path"
FILE_NAME = "audit.log"
#: The job's directory on a BOSH VM's persistent disk (/var/vcap/store/<job>), which the
#: release's bin/cpi and bin/cpi-operator export when there is one (jobs/cpi/templates/env.sh.erb):
#: the trail kept there outlives the VM, which create-env recreates from the stemcell.
JOB_STORE = "CPI_JOB_STORE"
#: The longest line written (bytes, newline included).
MAX_LINE = 16 * 1024
#: Seconds to wait for the file's lock (held for one write at a time): a holder that is
#: stopped (SIGSTOP) must not hang every CPI call behind it.
LOCK_TIMEOUT = 5.0
#: How long a string may stay in a line, tried in turn until the line fits.
_STRING_LIMITS = (None, 2048, 512, 128, 32)


class AuditConfig(BaseModel):
    """`cloud.properties.audit` in cpi.json: the trail of every IaaS mutation."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="Append one JSON line per IaaS mutation to the audit trail.")
    path: Path | None = Field(
        None,
        description="The audit file (its directory is created 0700 and refused if another user owns it or can "
        "write to it). Default: `audit.log` in the local cloud's state_dir; for other clouds, run from the "
        "release's job on a BOSH VM, `/var/vcap/store/<job>/audit/audit.log` on its persistent disk, else "
        "`~/.cache/bosh-cpi/audit/audit.log` in the CPI user's home. Several configs may share one: each line "
        "names its cloud and account, and `cpi audit` shows its config's own.",
    )
    max_bytes: int = Field(
        10 * 1024 * 1024, ge=1024, description="Size at which the file is rotated (renamed to .1, .1 to .2, ...)."
    )
    keep: int = Field(5, ge=0, le=1000, description="Rotated files kept (audit.log.1 is the newest).")


# ---------------------------------------------------------------- the call's context

_context: dict[str, Any] | None = None
_config: AuditConfig = AuditConfig()
_path_of: Callable[[], Path] | None = None
_resolved: Path | None = None
#: The account of the call's lines, worked out when the first line is written: a call that
#: changes nothing pays nothing for it.
_account_of: Callable[[], str | None] | None = None
#: The methods whose `metadata` argument names the deployment (BOSH's `deployment` tag).
DEPLOYMENT_METHODS = frozenset({"set_vm_metadata", "set_disk_metadata", "snapshot_disk"})


def default_path(cfg: Any) -> Path:
    """Where the trail of a config (cpi.config.Config) goes unless `audit.path` says:
    the cloud's own private state area when it has one (`audit_path(properties)` on its
    class: the local cloud's state_dir); else, run from the release's job on a BOSH VM, the
    job's directory on the persistent disk ($CPI_JOB_STORE/audit), where the trail outlives
    the VM; else ~/.cache/bosh-cpi/audit."""
    audit = getattr(cfg, "audit", None)
    if audit is not None and audit.path is not None:
        return Path(audit.path).expanduser()
    own = cfg.cloud_class.audit_path(cfg.properties)
    if own is not None:
        return Path(own)
    store = os.environ.get(JOB_STORE, "")
    if os.path.isabs(store):
        return Path(store) / "audit" / FILE_NAME
    return private.cache_dir("audit", PATH_SETTING) / FILE_NAME


def account_of(cfg: Any) -> str | None:
    """The account a config's calls act in, as its lines name it: `audit_account(properties)`
    on the cloud's class (worked out from the config alone: no request to the IaaS, and
    never a secret), None for a cloud without one. `cpi audit` works it out the same way
    to show one account's lines."""
    return cfg.cloud_class.audit_account(cfg.properties)


def endpoint(url: str) -> str:
    """A URL as an account string names it: scheme, host, port and path, never a
    `user:password@`, query or fragment (where a secret could ride along)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"  # IPv6
    try:
        port = parts.port
    except ValueError:
        port = None
    where = f"{parts.scheme}://{host}" + (f":{port}" if port else "")
    return where + parts.path.rstrip("/")


def fingerprint(value: str, prefix: str) -> str:
    """`prefix-` and 12 hex digits of the value's sha256: names one credential across
    lines without naming the credential itself."""
    import hashlib

    return f"{prefix}-{hashlib.sha256(value.encode()).hexdigest()[:12]}"


def deployment_of(method: str, arguments: dict[str, Any]) -> str | None:
    """The deployment a call names: the `deployment` tag of the metadata that
    set_vm_metadata, set_disk_metadata and snapshot_disk carry. create_vm's env names it
    only by position in `bosh.groups`, which no contract fixes: not taken from there (its
    VM's lines are tied to the deployment by the VM's set_vm_metadata line, cpi.operator.audit)."""
    if method not in DEPLOYMENT_METHODS:
        return None
    metadata = arguments.get("metadata")
    deployment = metadata.get("deployment") if isinstance(metadata, dict) else None
    return deployment if isinstance(deployment, str) and deployment else None


def begin(call: Any, arguments: dict[str, Any] | None = None) -> None:
    """Set the context of this process's call (an api.Call, with its bound arguments)."""
    cfg = call.config
    start(method=call.method, cloud=cfg.plugin, request_id=call.context.request_id,
          director_uuid=call.context.director_uuid, config=getattr(cfg, "audit", None) or AuditConfig(),
          path=lambda: default_path(cfg), account=lambda: account_of(cfg),
          deployment=deployment_of(call.method, arguments or {}))


def start(*, method: str, cloud: str, request_id: str | None = None, director_uuid: str | None = None,
          config: AuditConfig | None = None, path: Callable[[], Path] | Path | None = None,
          account: Callable[[], str | None] | str | None = None, deployment: str | None = None) -> None:
    """Set the context by hand (the operator's commands that act through a cloud)."""
    global _context, _config, _path_of, _resolved, _account_of
    _context = {"request_id": request_id, "director_uuid": director_uuid, "method": method, "cloud": cloud,
                "account": None, "deployment": deployment}
    _account_of = account if callable(account) else (lambda: account)
    _config = config or AuditConfig()
    _path_of = (lambda: Path(path)) if isinstance(path, (str, Path)) else path
    _resolved = None


def end() -> None:
    global _context, _path_of, _resolved, _account_of
    _context, _path_of, _resolved, _account_of = None, None, None, None


def _fields() -> dict[str, Any]:
    """The call's fields of every line, its account worked out on the first one; a cloud
    whose `audit_account` fails leaves the account null (a warning) but writes the line."""
    global _account_of
    if _context is None:
        return {}
    if _account_of is not None:
        compute, _account_of = _account_of, None
        try:
            _context["account"] = compute()
        except Exception as exc:  # noqa: BLE001 - a line without its account beats no line
            log.warning("audit: cannot tell the account of the %s cloud: %s", _context.get("cloud"),
                        logs.shown(str(exc), 200))
    return _context


def _path() -> Path:
    global _resolved
    if _resolved is None:
        if _path_of is None:
            raise RuntimeError("no audit path")
        path = _path_of()
        if not path.is_absolute():
            raise ValueError(f"{PATH_SETTING} must be an absolute path, got '{path}'")
        private.private_dir(path.parent, PATH_SETTING)
        _resolved = path
    return _resolved


# ---------------------------------------------------------------- writing


def record(action: str, resource_id: Any, changes: dict[str, Any] | None = None, *, plan: Plan | None = None,
           **extra: Any) -> None:
    """Append one line for one mutation. `changes`: {"old": ..., "new": ...} (what is not
    known is None); `extra`: more fields (resource_type, ...). Never raises.

    With `plan` (the call's, cpi.plan: a session's channel passes it) the line goes to the
    plan instead: it is what the real call would have written."""
    changes = changes or {"old": None, "new": None}
    if plan is not None:
        redactor = logs.active if logs.active is not None else logs.Redactor()
        plan.mutation(_clean(_entry(action, resource_id, changes, dict(extra)), redactor, None))
        return
    if _context is None or not _config.enabled:
        return
    try:
        line = _line(action, resource_id, changes, extra)
        appending.append(_path(), line, _config.max_bytes, _config.keep, max_line=MAX_LINE,
                         lock_timeout=LOCK_TIMEOUT, clock=now)
    except Exception as exc:  # noqa: BLE001 - an audit write must never fail the CPI call
        reason = getattr(exc, "message", None) or getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        log.warning("audit: could not record %s of %s in the audit trail: %s", action,
                    logs.shown(str(resource_id), 80), reason)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _entry(action: str, resource_id: Any, changes: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"time": now(), **_fields(), "action": action}
    if "resource_type" in extra:
        entry["resource_type"] = extra.pop("resource_type")
    entry["resource_id"] = resource_id
    entry["changes"] = {"old": changes.get("old"), "new": changes.get("new")}
    entry.update(extra)
    return entry


def _line(action: str, resource_id: Any, changes: dict[str, Any], extra: dict[str, Any]) -> bytes:
    entry = _entry(action, resource_id, changes, extra)
    entry["pid"] = os.getpid()
    redactor = logs.active if logs.active is not None else logs.Redactor()
    for limit in _STRING_LIMITS:
        data = (json.dumps(_clean(entry, redactor, limit), ensure_ascii=True, allow_nan=False) + "\n").encode()
        if len(data) <= MAX_LINE:
            return data
    entry["changes"] = {"old": None, "new": None}
    entry["truncated"] = True
    for key in list(extra):
        entry.pop(key, None)
    return (json.dumps(_clean(entry, redactor, 32), ensure_ascii=True, allow_nan=False) + "\n").encode()


def _clean(value: Any, redactor: logs.Redactor, limit: int | None, depth: int = 0) -> Any:
    """A JSON-safe copy: secret-looking keys dropped, strings masked (then cut to `limit`)."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth > 12:
        return "..."
    if isinstance(value, dict):
        cleaned = {}
        for key, item in value.items():
            key = str(key)
            if logs.looks_secret(key):
                continue
            cleaned[_text(key, redactor, limit)] = _clean(item, redactor, limit, depth + 1)
        return cleaned
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        if limit is not None and len(items) > limit:
            items = [*items[:limit], f"... ({len(value)} in all)"]
        return [_clean(item, redactor, limit, depth + 1) for item in items]
    if isinstance(value, datetime):
        value = value.isoformat()
    if isinstance(value, bytes):
        value = value.decode("utf-8", "backslashreplace")
    return _text(str(value), redactor, limit)


def _text(text: str, redactor: logs.Redactor, limit: int | None) -> str:
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # no lone surrogates in a line
    return redactor.text(text, limit=limit)


# ---------------------------------------------------------------- reading


def files(path: Path) -> list[Path]:
    """The trail's files, oldest first: audit.log.N ... audit.log.1, audit.log."""
    rotated = []
    directory = path.parent
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    for name in names:
        suffix = name[len(path.name) + 1:]
        if name.startswith(path.name + ".") and suffix.isdigit():
            rotated.append((int(suffix), directory / name))
    ordered = [p for _, p in sorted(rotated, reverse=True)]
    if os.path.lexists(path):
        ordered.append(path)
    return ordered


#: How much of a file is read at once: a query holds this and one line, whatever the trail's size.
CHUNK = 1 << 20


class Snapshot:
    """The trail's files (`files`) as they stood when opened, each held open and read only
    up to the size it had then: a query that reads the trail twice (a deployment's resources,
    then their lines; a table's widths, then its rows) sees the same lines both times while
    calls append and rotate (a rotated file is the same open file under another name)."""

    def __init__(self, path: Path):
        self.path = path
        self._open: list[tuple[BinaryIO, int]] = []
        for file in files(path):
            try:
                fd = private.open_nofollow(file, os.O_RDONLY | os.O_NONBLOCK)
            except OSError as exc:
                log.warning("cannot read %s: %s", file, exc.strerror)
                continue
            self._open.append((os.fdopen(fd, "rb"), os.fstat(fd).st_size))

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for handle, _ in self._open:
            handle.close()
        self._open = []

    def lines(self, start: bytes | None = None, stop: bytes | None = None) -> Iterator[bytes]:
        """Every whole line, oldest first, without its newline; with `start` (a time as
        `time_bytes` spells it) from each file's first line at or after it, found by a
        binary search (`_start`), and with `stop`, up to each file's first line at or
        after that time: each file is in time order (cpi.audit.appending)."""
        for handle, size in self._open:
            offset = 0 if start is None else _start(handle.fileno(), size, start)
            handle.seek(offset)
            yield from _lines(handle, size - offset, stop)


def _start(fd: int, size: int, start: bytes) -> int:
    """The offset of the file's first line whose time is at or after `start`, in about
    log2(size) reads of one line each. A line without a time (not the writer's) counts as
    at or after it: a doubt makes the search start earlier, never skip a line."""
    low, high = 0, size  # the lines before `low` are earlier; the first at or after `high` is not
    while low < high:
        middle = (low + high) // 2
        window = os.pread(fd, MAX_LINE + 1, max(middle - 1, 0))
        if middle == 0:
            begins = 0
        else:
            newline = window.find(b"\n")
            if newline < 0:  # no line begins in the next MAX_LINE bytes: none of the writer's
                high = middle
                continue
            begins = middle + newline
        if begins >= high:
            high = middle
            continue
        when = time_of(os.pread(fd, TIME_END, begins) if middle else window)
        if when is not None and when < start:
            low = begins + 1
        else:
            high = middle
    return low if low == 0 else _next_line(fd, low)


def _next_line(fd: int, offset: int) -> int:
    """The offset of the first line that begins at or after `offset` (> 0)."""
    newline = os.pread(fd, MAX_LINE + 1, offset - 1).find(b"\n")
    return offset + newline if newline >= 0 else offset


def _lines(handle: BinaryIO, size: int, stop: bytes | None = None) -> Iterator[bytes]:
    """The whole lines of the file's next `size` bytes, read CHUNK at a time, up to the
    first whose time is at or after `stop`. What no line of the writer's can be is
    dropped, never held: a line longer than MAX_LINE, and an end without its newline (a
    line being written, or cut)."""
    left, tail, skipping = size, b"", False
    while left > 0:
        chunk = handle.read(min(left, CHUNK))
        if not chunk:
            return
        left -= len(chunk)
        parts = chunk.split(b"\n")
        if skipping:
            skipping = len(parts) == 1
            parts[0] = b""  # the rest of the overlong line
        else:
            parts[0] = tail + parts[0]
        tail = parts.pop()
        if len(tail) >= MAX_LINE:
            tail, skipping = b"", True
        for raw in parts:
            if 0 < len(raw) < MAX_LINE:
                if stop is not None and raw[len(TIME_PREFIX):TIME_END] >= stop and time_of(raw) is not None:
                    return
                yield raw


def read(source: Path | Snapshot, needles: tuple[bytes, ...] = (), not_before: bytes | None = None,
         before: bytes | None = None, accept: Callable[[bytes], bool] | None = None) -> Iterator[dict[str, Any]]:
    """Every entry of the trail (a path, or a Snapshot of it), oldest first, one at a time:
    a query holds one chunk of the file and the lines it keeps, never the trail. A line
    that is not a JSON object is skipped.
    With `needles` (see `needle`; the most selective first: they are looked for in turn),
    only the lines holding every one of them are parsed, with
    `not_before` and `before` (see `time_bytes`) no line that starts with an earlier, or a
    later or equal, time, and with `accept` only the lines it says yes to: the others
    cannot match, and a query of a trail of a million lines reads it in a fraction of a
    second instead of decoding every line."""
    if not isinstance(source, Snapshot):
        with Snapshot(source) as snapshot:
            yield from read(snapshot, needles, not_before, before, accept)
        return
    for raw in source.lines(_shifted(not_before, -SEEK_SLACK), _shifted(before, SEEK_SLACK)):
        if (not_before is not None or before is not None) and raw.startswith(TIME_PREFIX):
            when = raw[10:TIME_END]  # first: a slice compared costs less than a search
            if (not_before is not None and when < not_before) or (before is not None and when >= before):
                continue
        if needles and not all(n in raw for n in needles):
            continue
        if accept is not None and not accept(raw):
            continue
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if isinstance(entry, dict):
            yield entry


def resource_bytes(raw: bytes) -> bytes | None:
    """A line's `resource_id` as the line spells it (`needle(resource_id)`), found without
    decoding the line: _line writes it just before `changes`. None when it is not there."""
    start = raw.find(_RESOURCE_KEY)
    if start < 0:
        return None
    start += len(_RESOURCE_KEY)
    end = raw.find(_CHANGES_KEY, start)
    return raw[start:end] if end >= 0 else None


def needle(value: Any) -> bytes:
    """The bytes a line with `value` in it holds, as _line writes it (json.dumps, ASCII):
    only a prefilter, since a line holding them may hold them under another key."""
    return json.dumps(value, ensure_ascii=True).encode()


#: What comes before and after a line's resource_id (_entry puts `changes` right after it).
_RESOURCE_KEY = b'"resource_id": '
_CHANGES_KEY = b', "changes": '


#: How far before `not_before` (after `before`) a query seeks: each file a release before
#: #32 wrote is in time order only within the time a writer waited for the lock
#: (LOCK_TIMEOUT), as it stamped its line before taking it.
SEEK_SLACK = 60.0


def _shifted(when: bytes | None, seconds: float) -> bytes | None:
    if when is None:
        return None
    try:
        return time_bytes(datetime.fromisoformat(when.decode().replace("Z", "+00:00")) + timedelta(seconds=seconds))
    except OverflowError:  # past year 9999 or before year 1: no bound to seek to
        return None


def time_bytes(when: datetime) -> bytes:
    """`when` as the lines spell their time, which sorts as the times do."""
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z").encode()
