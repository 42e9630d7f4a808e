"""A local VM's supervisor: what runit is to bosh-agent on a stemcell.

On a stemcell the agent is a runit service: when it exits (on purpose after an
update_settings that rotated its certificates, a crash, a kill) runit starts it again. A
local VM has no init, so this script is the VM's process (process.spawn starts it) and
runs the agent as its child, in its own session and with its marker, so that process.stop
still ends both at once.

 - First boot: until the agent is up (its mbus port open, or alive for the settle time) an
   agent that exits ends the supervisor with the agent's code, so that create_vm fails
   with it, as before there was a supervisor. Once up, BASE/supervisor.json is written:
   spawn waits for it.
 - Then every exit is logged in BASE/supervisor.log and the agent restarted after a delay
   that doubles from BACKOFF_FIRST to BACKOFF_MAX, reset once an agent stayed up STABLE
   seconds. After FAIL_AFTER exits in a row without staying up that long it is not
   restarted again: the state is "failing" and the supervisor stays (the VM still exists
   for has_vm and delete_vm; reboot_vm starts it afresh).
 - SIGTERM or SIGINT: SIGTERM the agent, SIGKILL it after KILL_AFTER seconds, exit.

Standard library only, run as `python -I supervisor.py`: like agent.py it runs outside the
CPI's venv path. Single-threaded: the signals it waits for (TERM, INT, CHLD) are blocked and
taken with sigtimedwait, so no handler ever interrupts a half-written state file.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time

BACKOFF_FIRST = 0.1
BACKOFF_MAX = 5.0
STABLE = 10.0
FAIL_AFTER = 5
KILL_AFTER = 10.0
STATE_FILE = "supervisor.json"
LOG_FILE = "supervisor.log"

WAITED = {signal.SIGTERM, signal.SIGINT, signal.SIGCHLD}
STOP = {signal.SIGTERM, signal.SIGINT}


class Supervisor:
    def __init__(self, base: str, command: list[str]):
        self.base = base
        self.command = command
        self.agent_pid: int | None = None
        self.started = 0.0
        self.restarts = 0
        self.quick_exits = 0
        self.backoff = BACKOFF_FIRST
        self.state = "booting"
        self.last_exit: dict | None = None
        # the environment spawn gave, marker included, as it was before Python added to
        # os.environ (LC_CTYPE): the agent gets exactly that
        with open("/proc/self/environ", "rb") as handle:
            self.environ = dict(entry.split(b"=", 1) for entry in handle.read().split(b"\0") if b"=" in entry)

    # ------------------------------------------------------------ the agent

    def start(self) -> None:
        self.agent_pid = os.posix_spawnp(
            self.command[0], self.command, self.environ,
            file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)],
            setsigmask=(), setsigdef=WAITED | {signal.SIGPIPE, signal.SIGXFSZ},
        )
        self.started = time.monotonic()
        self.log(f"agent started, pid {self.agent_pid}")

    def reap(self) -> int | None:
        """The agent's exit code (128+N for signal N) if it has exited, else None."""
        if self.agent_pid is None:
            return None
        pid, status = os.waitpid(self.agent_pid, os.WNOHANG)
        if pid == 0:
            return None
        self.agent_pid = None
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            self.last_exit = {"at": time.time(), "signal": signal.Signals(sig).name, "code": None}
            return 128 + sig
        code = os.WEXITSTATUS(status)
        self.last_exit = {"at": time.time(), "signal": None, "code": code}
        return code

    def stop(self) -> None:
        """SIGTERM the agent, SIGKILL it if it outlives KILL_AFTER; never restart."""
        self.state = "stopping"
        if self.agent_pid is None:
            return
        self.log(f"stopping agent pid {self.agent_pid}")
        _kill(self.agent_pid, signal.SIGTERM)
        deadline = time.monotonic() + KILL_AFTER
        while self.reap() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                self.log(f"agent ignored SIGTERM for {KILL_AFTER:.0f}s: killing it")
                _kill(self.agent_pid, signal.SIGKILL)
                os.waitpid(self.agent_pid, 0)
                return
            signal.sigtimedwait(WAITED, left)

    # ------------------------------------------------------------ what the operator reads

    def log(self, message: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
        with open(os.path.join(self.base, LOG_FILE), "a", opener=_private) as handle:  # rare: opened each time
            handle.write(f"{stamp} {message}\n")

    def save(self) -> None:
        """BASE/supervisor.json, atomically (a reader never sees half of it)."""
        doc = {"supervisor_pid": os.getpid(), "agent_pid": self.agent_pid, "state": self.state,
               "restarts": self.restarts, "last_exit": self.last_exit}
        path = os.path.join(self.base, STATE_FILE)
        temp = f"{path}.{os.getpid()}.tmp"
        with open(temp, "w", opener=_private) as handle:
            json.dump(doc, handle)
        os.replace(temp, path)

    # ------------------------------------------------------------ the life of the VM

    def boot(self, endpoint: tuple[str, int] | None, settle: float) -> int | None:
        """Start the agent and wait until it is up; its exit code if it died first."""
        self.start()
        settled = self.started + settle
        while True:
            taken = signal.sigtimedwait(WAITED, 0.01)
            if taken is not None and taken.si_signo in STOP:
                self.stop()
                return 0
            code = self.reap()
            if code is not None:
                self.log(f"agent exited while booting ({describe(self.last_exit)}): not restarted")
                return code
            if port_open(endpoint) if endpoint else time.monotonic() >= settled:
                self.state = "running"
                self.save()
                return None

    def supervise(self) -> None:
        """Restart the agent whenever it exits, until told to stop."""
        restart_at: float | None = None
        while True:
            timeout = 3600.0 if restart_at is None else max(0.0, restart_at - time.monotonic())
            taken = signal.sigtimedwait(WAITED, timeout)
            if taken is not None and taken.si_signo in STOP:
                self.stop()
                return
            if restart_at is not None and time.monotonic() >= restart_at:
                restart_at = None
                self.restarts += 1
                self.start()
                self.state = "running"
                self.save()
                continue
            if self.reap() is None:
                continue
            restart_at = self.exited()

    def exited(self) -> float | None:
        """Log an exit and decide: when to restart, or never (failing)."""
        lived = time.monotonic() - self.started
        if lived >= STABLE:  # it was up: a fresh start, as runit would try at once
            self.quick_exits, self.backoff = 0, BACKOFF_FIRST
        else:
            self.quick_exits += 1
        what = f"agent exited ({describe(self.last_exit)}) after {lived:.2f}s"
        if self.quick_exits >= FAIL_AFTER:
            self.state = "failing"
            self.log(f"{what}: {self.quick_exits} exits in a row without staying up {STABLE:.0f}s, "
                     "not restarting it (state failing; reboot_vm starts it again)")
            self.save()
            return None
        delay = self.backoff
        self.backoff = min(self.backoff * 2, BACKOFF_MAX)
        self.state = "backoff"
        self.log(f"{what}: restart {self.restarts + 1} in {delay:.2f}s")
        self.save()
        return time.monotonic() + delay


def describe(last_exit: dict | None) -> str:
    if not last_exit:
        return "unknown"
    return f"signal {last_exit['signal']}" if last_exit["signal"] else f"code {last_exit['code']}"


def _private(path: str, flags: int) -> int:
    """Files of the VM are private: the agent's exits may say more than anyone should read."""
    return os.open(path, flags | os.O_NOFOLLOW, 0o600)


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return  # exited already: reaped next


def port_open(endpoint: tuple[str, int]) -> bool:
    """The agent's mbus port answers: what the supervisor waits for, and what spawn
    (process.py, which imports it from here) refuses to start a VM over."""
    try:
        with socket.create_connection(endpoint, timeout=0.2):
            return True
    except OSError:
        return False


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="local-supervisor")
    parser.add_argument("--base", required=True)
    parser.add_argument("--endpoint", help="host:port the agent's mbus listens on, when HTTPS")
    parser.add_argument("--settle", type=float, default=0.2, help="seconds alive that count as up without a port")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no agent command")
    endpoint = None
    if args.endpoint:
        host, _, port = args.endpoint.rpartition(":")
        endpoint = (host, int(port))
    signal.pthread_sigmask(signal.SIG_BLOCK, WAITED)
    supervisor = Supervisor(args.base, command)
    try:
        code = supervisor.boot(endpoint, args.settle)
    except OSError as exc:
        print(f"ERROR - cannot start the agent '{command[0]}': {exc.strerror}", flush=True)
        return 127
    if code is not None:
        return code
    supervisor.supervise()
    supervisor.log("supervisor stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
