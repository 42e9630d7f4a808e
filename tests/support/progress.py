"""Running a long set-up step (a package install, a build) with its output shown line by
line as it comes and a time budget of its own.

A step run with its output captured prints nothing until it ends, and a slow mirror then
looks like a hung test run; one that outlives its budget must be stopped with everything it
started (apt-get runs dpkg, go build runs the compiler), not left behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

#: Say "still running" after this many quiet seconds (apt and the Go compiler can be silent).
QUIET = 30.0


@dataclass(frozen=True)
class Finished:
    #: the exit status; None when the budget ran out and the step was stopped
    returncode: int | None
    seconds: float
    #: its last lines, for the reason of a failure
    tail: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run(argv: list[str], *, budget: float, say: Callable[[str], None], env: dict[str, str] | None = None,
        cwd: str | None = None) -> Finished:
    """Run `argv`, passing each line of its output (stdout and stderr) to `say` as it comes;
    after `budget` seconds, stop it and its children (SIGTERM, then SIGKILL)."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, cwd=cwd, start_new_session=True)
    tail: deque[str] = deque(maxlen=15)
    last = [time.monotonic()]

    def pump() -> None:
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            # a line redrawn with carriage returns (dpkg's "Reading database ... 5%") shows as it ended
            line = raw.decode(errors="replace").rstrip().rsplit("\r", 1)[-1]
            tail.append(line)
            last[0] = time.monotonic()
            say(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    deadline = started + budget
    while proc.poll() is None:
        now = time.monotonic()
        if now > deadline:
            stop_group(proc)
            reader.join(5)
            return Finished(None, time.monotonic() - started, tuple(tail))
        if now - last[0] >= QUIET:
            say(f"still running (last line {now - last[0]:.0f}s ago)")
            last[0] = now
        time.sleep(0.2)
    reader.join(5)
    return Finished(proc.returncode, time.monotonic() - started, tuple(tail))


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group `proc` leads, SIGKILL when it does not go within 10 s."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def on_terminal(config, work: Callable[[Callable[[str], None]], None]) -> None:
    """Run a set-up step before the first test (`work(show)`), outside every test's timeout,
    with each line it shows written to pytest's terminal as it comes, past the capture."""
    reporter = config.pluginmanager.getplugin("terminalreporter")
    capture = config.pluginmanager.getplugin("capturemanager")
    show = reporter.write_line if reporter is not None else to_stderr
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        show("")
        work(show)
