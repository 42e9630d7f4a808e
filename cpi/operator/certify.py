"""`cpi certify`: the lifecycle the tests run (tests/lifecycle), in the director's order,
against whatever cloud a cpi.json names, through bin/cpi — one process per call, as a
director runs it — with a guaranteed cleanup of everything the run made, checked the way
`cpi orphans` looks (by this run's own director_uuid).

This module holds the scenario and the run; cpi/cli/certify.py parses and prints."""

from __future__ import annotations

import json
import os
import re
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn, Protocol

from cpi import processes

#: What the clouds log once per call: "12 AWS requests (RunInstances 1, ...)", "3 OpenStack
#: requests", "create_vm: 9 vCenter requests in 0.40s".
REQUESTS = re.compile(r"\b(\d+) (?:AWS|OpenStack|vCenter) requests?\b")

#: The CPI method that deletes each kind a run creates, and the order cleanup deletes in
#: (the reverse of creation, except that a VM goes before the disk it may still hold).
DELETERS = {"snapshot": "delete_snapshot", "vm": "delete_vm", "disk": "delete_disk", "stemcell": "delete_stemcell"}

DISK_MIB = 1024
GROWN_MIB = 2048


@dataclass
class Step:
    name: str  # the CPI method, with a suffix when it runs twice ("delete_vm (again)")
    method: str
    status: str = "skipped"  # passed | failed | skipped
    seconds: float | None = None
    requests: int | None = None  # from the response's log, when the cloud counts them
    created: str | None = None  # the cid it made
    error: str | None = None


@dataclass
class Report:
    cloud: str
    director_uuid: str
    steps: list[Step] = field(default_factory=list)
    cleanup: list[dict[str, Any]] = field(default_factory=list)  # {"kind", "cid", "status", "error"}
    leftovers: list[dict[str, Any]] = field(default_factory=list)  # what is still there afterwards
    interrupted: bool = False

    @property
    def clean(self) -> bool:
        return not self.leftovers

    @property
    def ok(self) -> bool:
        return (not self.interrupted and self.clean and bool(self.steps)
                and all(s.status == "passed" for s in self.steps))

    @property
    def passed(self) -> int:
        return sum(s.status == "passed" for s in self.steps)

    def tally(self) -> str:
        """"12/20": the steps passed so far of the scenario's, as the progress bar counts
        them while the run goes and the verdict counts them after (one count, so that the
        bar never says 6/21 of a run whose verdict says 20/20)."""
        return f"{self.passed}/{len(self.steps)}"

    def wire(self) -> dict[str, Any]:
        return {"cloud": self.cloud, "director_uuid": self.director_uuid, "ok": self.ok, "clean": self.clean,
                "interrupted": self.interrupted, "steps": [asdict(s) for s in self.steps],
                "cleanup": self.cleanup, "leftovers": self.leftovers}


#: What ends a run early, as Ctrl-C does: SIGTERM (a CI job cancelled) and SIGHUP (the
#: terminal closed). The cleanup runs all the same, with them ignored until it is done.
INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Journal:
    """A run's record on disk, written before it makes anything and after each thing it
    makes, removed once its cleanup leaves nothing: a run killed outright (SIGKILL, a
    reboot) leaves it, and the next `cpi certify` of the same config cleans up after it."""

    SETTING = "the certify journal (~/.cache/bosh-cpi/certify)"

    def __init__(self, director: str, cloud: str, config: str | None, directory: Path | str | None = None) -> None:
        self.directory = self.where(directory)
        self.path = self.directory / f"{director}.json"
        self.record: dict[str, Any] = {"director_uuid": director, "cloud": cloud, "config": config,
                                       "pid": os.getpid(), "pid_start": processes.start_time(os.getpid()),
                                       "started": time.time(), "made": {}}

    @classmethod
    def where(cls, directory: Path | str | None = None) -> Path:
        """The journals' directory (private, made 0700): ~/.cache/bosh-cpi/certify by default."""
        from cpi import private

        return private.private_dir(directory or private.cache_dir("certify", cls.SETTING), cls.SETTING)

    def write(self, made: dict[str, str] | None = None) -> None:
        from cpi import private

        if made is not None:
            self.record["made"] = dict(made)
        private.replace_file(self.path, json.dumps(self.record).encode())

    def remove(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    @classmethod
    def left(cls, cloud: str, config: str | None, directory: Path | str | None = None) -> list[dict[str, Any]]:
        """The records of earlier runs of this cloud and config that did not finish their
        cleanup, and whose process is gone."""
        found = []
        for path in sorted(cls.where(directory).glob("*.json")):
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if not isinstance(record, dict) or record.get("cloud") != cloud or record.get("config") != config:
                continue
            pid = record.get("pid")
            if pid != os.getpid() and processes.alive(pid, record.get("pid_start")):
                continue  # a run going on now (its pid not since reused by another process)
            found.append(record)
        return found




class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, taken as Ctrl-C is."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


class Failed(Exception):
    """A step's answer was not what the director expects."""


def requests_in(log: str) -> int | None:
    counts = [int(n) for n in REQUESTS.findall(log or "")]
    return sum(counts) if counts else None


class CallsBinCpi(Protocol):
    """What a run needs of its client (cpi.cli.client.Client, which imports this module):
    one CPI call through bin/cpi, and the director_uuid its calls' context carries."""

    director_uuid: str

    def raw(self, method: str, *arguments: Any) -> dict: ...


class Certify:
    """One run: `client` is a cpi.cli.client.Client carrying this run's director_uuid;
    `finder(director_uuid, stemcell_cid)` lists what the cloud still holds for it
    (Resource-like objects with kind and cid)."""

    def __init__(self, client: CallsBinCpi, finder: Callable[[str, str | None], list], cloud: str,
                 stemcell: tuple[str, dict], vm_type: dict, disk_type: dict, networks: dict,
                 journal: Journal | None = None) -> None:
        self.client = client
        self.journal = journal
        self.finder = finder
        self.stemcell_args = stemcell
        self.vm_type = vm_type
        self.disk_type = disk_type
        self.networks = networks
        self.agent_id = f"agent-certify-{uuid.uuid4()}"
        self.report = Report(cloud=cloud, director_uuid=client.director_uuid)
        self.created: dict[str, str] = {}  # kind -> cid, while it exists
        self.cid: dict[str, str] = {}  # kind -> cid, ever made

    # ------------------------------------------------------------------ the scenario

    def scenario(self) -> list[tuple[str, Callable[[], Any]]]:
        c = self.cid
        meta = {"director": "cpi-certify", "deployment": "cpi-certify", "name": "certify/0", "index": "0",
                "job": "certify", "id": self.agent_id}
        return [
            ("info", lambda: self.call("info", check=lambda r: isinstance(r, dict) and r.get("stemcell_formats"))),
            ("create_stemcell", lambda: self.create("stemcell", "create_stemcell", *self.stemcell_args)),
            ("create_vm", lambda: self.create(
                "vm", "create_vm", self.agent_id, c["stemcell"], self.vm_type, self.networks, [],
                {"bosh": {"group": "cpi-certify", "groups": ["cpi-certify"]}})),
            ("has_vm", lambda: self.call("has_vm", c["vm"], check=lambda r: r is True)),
            ("set_vm_metadata", lambda: self.call("set_vm_metadata", c["vm"], meta)),
            ("create_disk", lambda: self.create("disk", "create_disk", DISK_MIB, self.disk_type, c["vm"])),
            ("has_disk", lambda: self.call("has_disk", c["disk"], check=lambda r: r is True)),
            ("attach_disk", lambda: self.call("attach_disk", c["vm"], c["disk"], check=bool)),
            ("get_disks", lambda: self.call("get_disks", c["vm"], check=lambda r: r == [c["disk"]])),
            ("set_disk_metadata", lambda: self.call("set_disk_metadata", c["disk"], meta)),
            ("snapshot_disk", lambda: self.create("snapshot", "snapshot_disk", c["disk"], {
                "deployment": "cpi-certify", "job": "certify", "index": 0, "director_name": "cpi-certify",
                "director_uuid": self.report.director_uuid, "agent_id": self.agent_id})),
            ("delete_snapshot", lambda: self.delete("snapshot")),
            ("detach_disk", lambda: self.call("detach_disk", c["vm"], c["disk"])),
            ("resize_disk", lambda: self.call("resize_disk", c["disk"], GROWN_MIB)),
            ("reboot_vm", lambda: self.call("reboot_vm", c["vm"])),
            ("delete_vm", lambda: self.delete("vm")),
            ("delete_vm (again)", lambda: self.call("delete_vm", c["vm"], check=lambda r: r is None)),
            ("has_vm (after delete)", lambda: self.call("has_vm", c["vm"], check=lambda r: r is False)),
            ("delete_disk", lambda: self.delete("disk")),
            ("delete_stemcell", lambda: self.delete("stemcell")),
        ]

    # ------------------------------------------------------------------ one step

    def call(self, method: str, *arguments: Any, check: Callable[[Any], Any] | None = None) -> Any:
        response = self.client.raw(method, *arguments)
        self._last_log = response.get("log", "")
        if response.get("error"):
            err = response["error"]
            raise Failed(f"{err['type']}: {err['message']}")
        result = response.get("result")
        if check is not None and not check(result):
            raise Failed(f"unexpected result {result!r}")
        return result

    def create(self, kind: str, method: str, *arguments: Any) -> str:
        result = self.call(method, *arguments)
        cid = result[0] if kind == "vm" and isinstance(result, list) else result
        if not isinstance(cid, str) or not cid:
            raise Failed(f"unexpected result {result!r}")
        self.created[kind] = self.cid[kind] = cid
        if self.journal is not None:
            self.journal.write(self.cid)
        return cid

    def delete(self, kind: str) -> None:
        self.call(DELETERS[kind], self.cid[kind], check=lambda r: r is None)
        self.created.pop(kind, None)

    # ------------------------------------------------------------------ the run

    def run(self, progress: Callable[[Step], None] | None = None) -> Report:
        """Every step in order until one fails (the rest are skipped), then the cleanup,
        whatever happened — a failing step, an exception, Ctrl-C, SIGTERM, SIGHUP."""
        steps = self.scenario()
        self.report.steps = [Step(name, name.split(" ")[0]) for name, _ in steps]
        if self.journal is not None:
            self.journal.write()

        def interrupt(signum: int, frame: FrameType | None) -> NoReturn:
            raise Interrupted(signal.Signals(signum).name)

        previous = {signum: signal.signal(signum, interrupt) for signum in INTERRUPTS[1:]}
        try:
            for step, (_, action) in zip(self.report.steps, steps, strict=True):
                before = set(self.created.items())
                self._last_log = ""
                started = time.monotonic()
                try:
                    action()
                    step.status = "passed"
                except Failed as exc:
                    step.status, step.error = "failed", str(exc)
                except KeyboardInterrupt as exc:
                    step.status, step.error = "failed", f"interrupted ({getattr(exc, 'why', 'Ctrl-C')})"
                    self.report.interrupted = True
                except Exception as exc:  # noqa: BLE001 - a crashed bin/cpi, an unreadable answer: still clean up
                    step.status, step.error = "failed", f"{type(exc).__name__}: {exc}"
                finally:
                    step.seconds = round(time.monotonic() - started, 3)
                    step.requests = requests_in(self._last_log)
                    made = set(self.created.items()) - before
                    step.created = ", ".join(cid for _, cid in sorted(made)) or None
                if progress:
                    progress(step)
                if step.status != "passed":
                    break
        except KeyboardInterrupt:
            self.report.interrupted = True
        finally:
            self.cleanup()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return self.report

    def cleanup(self) -> None:
        """Delete what still exists (a second Ctrl-C, SIGTERM or SIGHUP is ignored meanwhile:
        bin/cpi children inherit that and finish their deletes), then look for anything
        tagged with this run's director_uuid — what a call that failed half-way made —
        delete that too, and look again. A clean end removes the run's journal."""
        previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in INTERRUPTS}
        try:
            for kind in DELETERS:
                if kind in self.created:
                    self._delete_for_cleanup(kind, self.created.pop(kind))
            found = self._find()
            for resource in found:
                if resource["kind"] in DELETERS:
                    self._delete_for_cleanup(resource["kind"], resource["cid"])
            self.report.leftovers = self._find() if found else found
            if self.journal is not None and self.report.clean:
                self.journal.remove()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _delete_for_cleanup(self, kind: str, cid: str) -> None:
        entry: dict[str, Any] = {"kind": kind, "cid": cid, "status": "deleted", "error": None}
        try:
            response = self.client.raw(DELETERS[kind], cid)
            if response.get("error"):
                entry["status"] = "failed"
                entry["error"] = f"{response['error']['type']}: {response['error']['message']}"
        except Exception as exc:  # noqa: BLE001 - one failed delete is reported; the others still run
            entry["status"], entry["error"] = "failed", f"{type(exc).__name__}: {exc}"
        self.report.cleanup.append(entry)

    def _find(self) -> list[dict[str, Any]]:
        """What the cloud still holds for this run: by director_uuid, plus the stemcell by its
        cid (a cloud need not tag images)."""
        try:
            found = self.finder(self.report.director_uuid, self.cid.get("stemcell"))
        except Exception as exc:  # noqa: BLE001 - the report says it could not look, and why
            return [{"kind": "?", "cid": "?", "state": f"could not look: {type(exc).__name__}: {exc}"}]
        return [{"kind": r.kind, "cid": r.cid, "state": r.state} for r in found]
