"""Start and stop a local VM's process: a supervisor (supervisor.py) that runs the VM's
agent (the built-in one or a real bosh-agent) and restarts it when it exits, as runit does
on a stemcell.

The process is fully detached: its own session, stdin from /dev/null, output to
BASE/agent.log. If it inherited the CPI's stdout or stderr, the director (which reads both
to EOF) would hang on every create_vm.

A CPI can be killed between starting the process and saving its pid, so the pid is only
the fast path: every VM process carries `BOSH_CPI_VM=<its VM directory>` in its
environment (inherited by anything it starts), and stopping a VM also stops every process
found with that marker in /proc/*/environ.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cpi.errors import CloudError, VMCreationFailed
from cpi.failpoints import reached
from cpi.logs import shown
from cpi.private import open_nofollow
from cpi.processes import alive, proc_state, start_time

log = logging.getLogger(__name__)

BUILTIN_AGENT = Path(__file__).with_name("agent.py")
#: The VM's process: it runs the agent and restarts it as runit does on a stemcell
SUPERVISOR = Path(__file__).with_name("supervisor.py")
#: What the supervisor writes once the agent is up, and after each exit and restart
STATE_FILE = "supervisor.json"
#: An agent that dies on bad settings does so at once: alive this long (with no mbus port
#: to wait for) it counts as booted
SETTLE = 0.2
MARKER = "BOSH_CPI_VM"


def agent_command(configured: list[str] | None) -> list[str]:
    return list(configured) if configured else [sys.executable, "-I", str(BUILTIN_AGENT)]


def mbus_endpoint(mbus: str | None) -> tuple[str, int] | None:
    """The (host, port) an agent listens on for an HTTPS mbus (create-env), else None."""
    if not mbus:
        return None
    url = urlsplit(mbus)
    if url.scheme != "https" or not url.port:
        return None
    host = url.hostname or "127.0.0.1"
    # an mbus bound to every interface is reached on loopback: nothing here binds
    return ("127.0.0.1" if host in ("0.0.0.0", "::", "localhost") else host), url.port  # noqa: S104  # nosec B104


def marked(marker: str) -> list[int]:
    """Live processes (not zombies) whose environment carries BOSH_CPI_VM=`marker`."""
    wanted = f"{MARKER}={marker}".encode()
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if wanted in environ.split(b"\0") and proc_state(int(entry)) not in (None, "Z", "X"):
            found.append(int(entry))
    return found


def spawn(command: list[str], base: Path, endpoint: tuple[str, int] | None,
          boot_timeout: float) -> tuple[int, str | None]:
    """Start the VM process and wait until it is up; returns (pid, start time)."""
    from .supervisor import port_open  # here, not at the top: only the methods that start a VM need it

    if endpoint and port_open(endpoint):
        raise VMCreationFailed(
            f"mbus port {endpoint[1]} on {endpoint[0]} is already in use (a leftover agent would "
            "receive this deployment); delete the VM holding it first",
            ok_to_retry=False,
        )
    argv = [*command, "-b", str(base), "-P", "dummy", "-M", "dummy", "-C", str(base / "agent.json")]
    path = os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    env = {"PATH": path, "TMPDIR": str(base), MARKER: str(base)}
    import shutil  # here, not at the top: most calls start no process (~3 ms of imports)
    import subprocess

    if shutil.which(command[0], path=path) is None:
        raise VMCreationFailed(f"cannot start the VM process '{command[0]}': not an executable file",
                               ok_to_retry=False)
    (base / STATE_FILE).unlink(missing_ok=True)  # a reboot's: the new supervisor writes its own
    supervised = [sys.executable, "-I", str(SUPERVISOR), "--base", str(base),
                  *(["--endpoint", f"{endpoint[0]}:{endpoint[1]}"] if endpoint else []),
                  "--settle", str(SETTLE), "--", *argv]
    log.info("starting VM process: %s", " ".join(argv))
    # the agent's output may quote its settings: private, as every file of the VM
    with os.fdopen(open_nofollow(base / "agent.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as out:
        try:
            process = subprocess.Popen(
                supervised,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=base,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise VMCreationFailed(f"cannot start the VM process '{command[0]}': {exc.strerror}",
                                   ok_to_retry=False) from None
    reached("vm spawned")
    pid_start = start_time(process.pid)
    deadline = time.monotonic() + boot_timeout
    while True:
        code = process.poll()
        if code is not None:
            raise VMCreationFailed(
                f"the VM process exited with code {code} while booting: {last_error(base / 'agent.log')}",
                ok_to_retry=True,
            )
        if (base / STATE_FILE).exists():  # the supervisor saw the agent up (its port open)
            return process.pid, pid_start
        if time.monotonic() >= deadline:
            stop(process.pid, pid_start, str(base))
            raise VMCreationFailed(
                f"the VM process did not open mbus port {endpoint[1] if endpoint else '?'} within "
                f"{boot_timeout:.0f}s: {last_error(base / 'agent.log')}",
                ok_to_retry=True,
            )
        time.sleep(0.01)


def agent_state(base: Path) -> dict[str, Any] | None:
    """What the VM's supervisor last wrote of its agent (supervisor.py), None before it did."""
    try:
        with os.fdopen(open_nofollow(base / STATE_FILE, os.O_RDONLY), "rb") as handle:
            doc = json.load(handle)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def stop(pid: int | None, pid_start: str | None, marker: str | None, timeout: float = 10.0) -> None:
    """SIGTERM the VM's process groups, wait, SIGKILL what is left; synchronous, because
    the next create_vm may need the same mbus port. Stops the recorded pid and every
    process carrying the VM's marker (a pid that never reached the record, a child)."""

    def remaining() -> list[int]:
        pids = marked(marker) if marker else []
        if pid is not None and alive(pid, pid_start) and pid not in pids:
            pids.append(pid)
        return pids

    pids = remaining()
    if not pids:
        return
    for each in pids:
        _signal_group(each, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pids:
        if time.monotonic() >= deadline:
            log.warning("VM process(es) %s ignored SIGTERM for %.0fs; killing them", pids, timeout)
            break
        for each in pids:
            _reap(each)
        time.sleep(0.01)
        pids = remaining()
    kill_deadline = time.monotonic() + 5
    while pids:
        for each in pids:
            _signal_group(each, signal.SIGKILL)
            _reap(each)
        if time.monotonic() >= kill_deadline:
            raise CloudError(f"VM process(es) {pids} survived SIGKILL", ok_to_retry=True)
        time.sleep(0.02)
        pids = remaining()


def _signal_group(pid: int, sig: int) -> None:
    """Signal the process's group when it leads one (a VM process leads its own session),
    else the process alone; never this CPI's own group."""
    try:
        group = os.getpgid(pid)
        if group == pid and group != os.getpgrp():
            os.killpg(group, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        return
    except PermissionError:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def _reap(pid: int) -> None:
    """Collect the exit status if the process is our own child (tests, reboot in one call)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child: init reaps it
    except OSError as exc:
        if exc.errno != errno.ECHILD:
            raise


#: How much of the end of agent.log is read for the reason a boot failed: an agent that
#: logs gigabytes must not make the CPI read them all.
LOG_TAIL = 64 * 1024


def last_error(log_path: Path) -> str:
    """The agent's last ERROR line (or last line) — the reason a boot failed — masked of
    every secret this call knows before it is cut short (an agent that prints its settings
    prints the mbus password; a cut made first could leave the head of one)."""
    try:
        with os.fdopen(open_nofollow(log_path, os.O_RDONLY), "rb") as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - LOG_TAIL))
            tail = handle.read(LOG_TAIL).decode("utf-8", errors="replace")
    except OSError:
        return "no agent log"
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    errors = [line for line in lines if "ERROR" in line]
    return shown((errors or lines or ["agent log is empty"])[-1], 500)[1:-1]
