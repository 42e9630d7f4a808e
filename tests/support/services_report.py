"""What bin/test leaves running when it ends, and how to stop it.

The loopback OpenStack services (Keystone, Glance, Placement, Nova, Neutron, Cinder, and
the MariaDB and RabbitMQ under them) take minutes to set up, so tests/openstack/setup.sh
leaves them running for the next run; nothing else should outlive the suite (the tests'
redis-servers, moto servers, local VMs and warm helpers are stopped by the tests, and
tests/conftest.py fails a run that leaves one). This prints each service still running
with the memory its processes hold, and the one command that stops them all.

    python -m tests.support.services_report      (bin/test runs it last)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

STATE_DIR = Path(os.environ.get("OS_STATE_DIR", "/var/tmp/cpi-openstack"))
STOP = "tests/openstack/stop.sh"
#: processes no setup.sh pid file names, but that a test run may have started
STRAYS = ("redis-server", "moto_server", "vcsim")


def _stat(pid: str) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _rss_kib(pid: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def _sessions() -> dict[str, list[str]]:
    """Live processes by session id."""
    found: dict[str, list[str]] = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            fields = _stat(pid)
            if fields and fields[0] != "Z":
                found.setdefault(fields[3], []).append(pid)
    return found


def services() -> list[tuple[str, int, int, int]]:
    """(name, leader pid, processes, RSS KiB) of each service setup.sh started that runs."""
    sessions = _sessions()
    running, seen = [], set()
    # shortest name first: of two files naming one leader (mariadb, mariadbd.own), the plain one
    for pid_file in sorted((STATE_DIR / "run").glob("*.pid"), key=lambda f: (len(f.stem), f.stem)):
        text = pid_file.read_text().strip()
        if not text.isdigit() or text not in sessions or text in seen:
            continue  # gone, no session leader, or named by another pid file too
        seen.add(text)
        members = sessions[text]
        running.append((pid_file.stem, int(text), len(members), sum(_rss_kib(p) for p in members)))
    return sorted(running)


def strays() -> list[tuple[str, int, int]]:
    """(command, pid, RSS KiB) of processes of the kinds the tests start and stop themselves."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            command = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if command in STRAYS:
            found.append((command, int(pid), _rss_kib(pid)))
    return found


def report() -> str:
    lines = []
    running = services()
    if running:
        total = sum(rss for *_, rss in running)
        lines.append(f"bin/test: {len(running)} services of the loopback OpenStack are left running for the next run "
                     f"(tests/openstack/setup.sh, state in {STATE_DIR}), holding {total / 1024:.0f} MiB:")
        for name, pid, count, rss in running:
            processes = "processes" if count > 1 else "process  "
            lines.append(f"  {name:<22} pid {pid:<8} {count:>3} {processes} {rss / 1024:>7.0f} MiB")
        lines.append(f"bin/test: stop them all with: {STOP}  (state kept; remove {STATE_DIR} to start afresh)")
    else:
        lines.append("bin/test: no OpenStack service is left running")
    for command, pid, rss in strays():
        lines.append(f"bin/test: also running: {command} (pid {pid}, {rss / 1024:.0f} MiB), not started by "
                     f"setup.sh: stop it with kill {pid}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(), file=sys.stderr)
