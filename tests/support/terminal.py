"""A command run in a pseudo-terminal of a given width, as an operator at a terminal runs
it: stdin, stdout and stderr are the terminal (so isatty() is true and the window size is
the one set), and what is typed is written to it."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from collections.abc import Sequence
from dataclasses import dataclass

#: Terminal control sequences (colours, cursor moves, a spinner's redraws).
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


@dataclass
class Seen:
    returncode: int
    screen: str  # everything the terminal showed (stdout and stderr, CRLF made LF)

    @property
    def lines(self) -> list[str]:
        """The lines as they stay on the screen: control sequences dropped, a line redrawn
        after a carriage return kept as last drawn, lines a spinner left empty dropped."""
        kept = [_CONTROL.sub("", line).rsplit("\r", 1)[-1] for line in self.screen.split("\n")]
        return [line for line in kept if line.strip() or not line]


def run(argv: Sequence[str], *, columns: int = 80, typed: str = "", env: dict | None = None,
        cwd: str | os.PathLike | None = None, timeout: float = 120, answer_after: str | None = None) -> Seen:
    """Run argv on a new pseudo-terminal `columns` wide; `typed` is written once the screen
    shows `answer_after` (at once when None)."""
    main, replica = pty.openpty()
    fcntl.ioctl(replica, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    environment = {**(env if env is not None else os.environ), "TERM": "xterm", "COLUMNS": str(columns)}
    proc = subprocess.Popen(list(argv), stdin=replica, stdout=replica, stderr=replica, cwd=cwd, env=environment,
                            start_new_session=True)
    os.close(replica)
    shown = b""
    pending = typed.encode()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if pending and (answer_after is None or answer_after.encode() in shown):
                os.write(main, pending)
                pending = b""
            ready, _, _ = select.select([main], [], [], 0.1)
            if not ready:
                if proc.poll() is not None and not select.select([main], [], [], 0.2)[0]:
                    break
                continue
            try:
                chunk = os.read(main, 65536)
            except OSError:  # every end of the replica is closed: all was read
                break
            if not chunk:
                break
            shown += chunk
        else:
            proc.kill()
            raise TimeoutError(f"{argv} did not end within {timeout}s; the screen:\n{shown.decode(errors='replace')}")
    finally:
        os.close(main)
    return Seen(proc.wait(timeout=30), shown.decode(errors="replace").replace("\r\n", "\n"))
