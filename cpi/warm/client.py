"""The client: what bin/cpi runs to hand its call to the helper (standard library only,
imported before `site`), and the starting and stopping of a helper."""

from __future__ import annotations

import _socket
import os
import sys

from .where import (
    IMPORT_PATH,
    NATIVE,
    START_TIMEOUT,
    peer_uid,
    private_dir_ok,
    socket_dir,
    socket_path,
)


def call(argv: list[str], stdin: tuple[bytes, str | None]) -> int | None:
    """Make this process's call through the helper: `stdin` is the request as the client
    read it (cpi.rpc.read_all: the bytes, and why reading stopped early if it did). Returns
    the exit code once the worker has run it; None when the helper did not take the call
    (no worker began it): the caller then makes it itself."""
    path = socket_path()
    if not private_dir_ok(socket_dir()):
        if os.path.lexists(socket_dir()):
            _say(f"bosh-cpi: the warm helper is not used: {socket_dir()} is not a private directory of uid "
                 f"{os.getuid()} (a real directory, 0700, its own); this call is made cold")
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(START_TIMEOUT)
        sock.connect(path)
        if peer_uid(sock) != os.getuid():
            return None
        header = {"argv": argv, "env": dict(os.environ), "umask": _umask(), "stdin": len(stdin[0]),
                  "stdin_problem": stdin[1]}
        _send_request(sock, header, stdin[0])
        reader = _Lines(sock)
        started = reader.line()
        if not started.startswith("S "):
            return None  # refused (a stale helper): no worker exists
        # The descriptors go with "G", to a worker that is there to take them: sent earlier,
        # they would sit in a stopped helper's queue and keep stdout open (no EOF for the
        # caller) after the client had made the call itself.
        cwd = os.open(".", getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY)
        try:
            rights = b"".join(fd.to_bytes(4, NATIVE, signed=True) for fd in (0, 1, 2, cwd))
            sock.sendmsg([b"G"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)])
        finally:
            os.close(cwd)
    except OSError:  # includes a timeout: no "S" in time, and the late worker gets no "G"
        sock.close()
        return None
    sock.settimeout(None)
    worker = int(started[2:])
    _forward_signals(worker)
    status = ""
    try:
        # "T" (the worker stopped) and "C" (continued) are news only: the helper stops and
        # continues this process itself, in the order the worker's states came
        while not status.startswith(("X", "K")):
            status = reader.line()
    except OSError:
        # the connection ended without word: the worker, which says how its call ended (and
        # of what signal it dies, but for SIGKILL), is gone, and so is the helper, which
        # would have said it for the worker (killed first): the worker died of SIGKILL
        status = f"K{_signal_kill()}"
    sock.close()
    if status.startswith("K"):
        _die_like(int(status[1:]))
    return int(status[1:]) if status.startswith("X") else 1


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _send_request(sock: _socket.socket, header: dict, body: bytes = b"") -> None:
    """The header (length, JSON), then `body` (the request's bytes)."""
    from cpi import strict_json

    data = strict_json.dumps(header).encode("ascii")
    sock.sendall(len(data).to_bytes(4, "big") + data + body)


class _Lines:
    """Newline-ended messages off a stream socket."""

    def __init__(self, sock: _socket.socket) -> None:
        self.sock, self.buffer = sock, b""

    def line(self) -> str:
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(256)
            if not chunk:
                raise OSError("the helper closed the connection")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("ascii", "replace")


def _say(line: str) -> None:
    try:
        os.write(2, (line + "\n").encode(errors="replace"))
    except OSError:
        pass


def _forward_signals(worker: int) -> None:
    """What is sent to this process reaches the call (the worker): SIGTERM, SIGINT, SIGHUP,
    and SIGCONT (this process continued: its worker too). SIGKILL cannot be forwarded: the
    worker watches this connection and dies with it (_watch_client)."""
    import _signal  # type: ignore[import-not-found]  # signal's C core: no enum import on bin/cpi's path

    def forward(signum: int, frame: object) -> None:
        try:
            os.kill(worker, signum)
        except OSError:
            pass

    for signum in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP, _signal.SIGCONT):
        _signal.signal(signum, forward)


def _signal_kill() -> int:
    import _signal

    return int(_signal.SIGKILL)


def _die_like(signum: int) -> None:
    """End this process by the signal its worker died of, as a cold process would have."""
    import _signal

    sys.stdout.flush()
    sys.stderr.flush()
    try:
        _signal.signal(signum, _signal.SIG_DFL)
    except (OSError, ValueError):
        pass  # SIGKILL and SIGSTOP have no handler to reset
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)  # a signal that does not end a process (SIGSTOP's kin)


def stop() -> bool:
    """Ask this install's helper to exit (tests and benchmarks); False if none answered."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(START_TIMEOUT)
        sock.connect(socket_path())
        _send_request(sock, {"stop": True})
        return _Lines(sock).line() == "stopped"
    except OSError:
        return False
    finally:
        sock.close()


def running() -> bool:
    """Whether this install's helper answers (its socket accepts a connection)."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(socket_path())
        return peer_uid(sock) == os.getuid()
    except OSError:
        return False
    finally:
        sock.close()


def start(idle: float, preload: list[str]) -> None:
    """Start this install's helper in the background, unless one is running or starting
    (it holds its lock file while it lives), to preload the SDKs of the clouds named in
    `preload`. Never raises: a helper that cannot start only means cold calls."""
    try:
        import fcntl

        directory = socket_dir()
        parent = os.path.dirname(directory)
        if not os.path.isdir(parent):
            os.makedirs(parent, 0o700, exist_ok=True)  # ~/.cache/bosh-cpi, as cpi.private makes it
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
        if not private_dir_ok(directory):
            return
        lock = os.open(socket_path() + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return  # a helper holds it: running, or warming up
        finally:
            os.close(lock)
        from cpi import strict_json

        code = ("import sys, json; sys.path[:] = json.loads(sys.argv.pop(1)); "
                "from cpi.warm.boot import helper; helper(float(sys.argv[1]), json.loads(sys.argv[2]))")
        devnull = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
        argv = [sys.executable, "-I", "-S", "-c", code, strict_json.dumps(IMPORT_PATH), repr(idle),
                strict_json.dumps(list(preload))]
        # HOME too: the helper listens where its starter (and so each client of that HOME) looks
        environment = {"PATH": os.environ.get("PATH", os.defpath)}
        if os.environ.get("HOME"):
            environment["HOME"] = os.environ["HOME"]
        os.posix_spawn(sys.executable, argv, environment, file_actions=devnull,
                       setsid=True)
    except Exception:  # noqa: BLE001 - the call is answered already; a helper is only a speed-up
        return
