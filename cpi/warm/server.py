"""The helper's fork server: listen on the install's socket, fork one worker per call
that takes on its client's descriptors and runs the cold call's code, report how each
ended, and exit when idle, stale, replaced or asked to."""

from __future__ import annotations

import _socket
import os
import sys
from typing import TYPE_CHECKING

from .where import (
    MAX_HEADER,
    MAX_STDIN,
    NATIVE,
    REQUEST_TIMEOUT,
    peer_pid,
    peer_uid,
    private_dir_ok,
    socket_dir,
    socket_path,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    #: What a worker runs: cpi.rpc.serve, the cold call (argv, stdin as the client read it).
    Run = Callable[[list[str], tuple[bytes, str | None]], int]

#: What a file's stat must still say for the helper to serve: its inode and device (a file
#: replaced by another, `pip install` renaming a new one in), size, mtime, and ctime, which
#: every write and every `touch -r` moves and no user tool can set back.
Stamp = tuple[int, int, int, int, int]


def _stamp(st: os.stat_result) -> Stamp:
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _loaded_files() -> list[str]:
    """What the helper's code is made of: the file of every module it imported (the CPI's
    own and every dependency's, sources and extension modules alike), and each directory of
    its import path with the .pth files there (pip adds and removes entries when it installs
    or upgrades a dependency or a plugin; a .pth changes what imports)."""
    files = [getattr(m, "__file__", None) for m in list(sys.modules.values())]
    paths = [p for p in files if isinstance(p, str) and os.path.isabs(p)]
    for directory in [d for d in sys.path if d and os.path.isdir(d)]:
        paths.append(directory)
        try:
            paths += [os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".pth")]
        except OSError:
            continue
    return list(dict.fromkeys(paths))


def _own_files(since_ns: int, paths: list[str]) -> dict[str, Stamp] | None:
    """The stamp of each of `paths` (_loaded_files). None when one of them
    changed at or after `since_ns` (the helper's start): a file edited while the helper
    was importing it (a `git pull` during the first call) must not be served as it was
    read."""
    found = {}
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if max(st.st_mtime_ns, st.st_ctime_ns) >= since_ns:
            return None
        found[path] = _stamp(st)
    return found


def _staleness(since_ns: int) -> Callable[[], bool] | None:
    """A check, cheap enough to make before each call, that a file the helper loaded has
    changed since: inotify's watches (cpi.warm.watch), else the files' stamps. None when
    one changed at or after `since_ns` already. The watches are set before the stamps are
    taken: a change between the two is seen by one of them."""
    from .watch import Watch

    paths = _loaded_files()
    try:
        watch: Watch | None = Watch(paths)
    except OSError:
        watch = None
    files = _own_files(since_ns, paths)
    if files is None:
        return None
    if watch is not None:
        return watch.changed
    return lambda: not _unchanged(files)


def _unchanged(files: dict[str, Stamp]) -> bool:
    for path, stamp in files.items():
        try:
            if _stamp(os.stat(path)) != stamp:
                return False
        except OSError:
            return False
    return True


def _install_present() -> bool:
    """The interpreter and the CPI's code are still there (`bosh delete-env` removes the
    package: a helper of a removed install exits rather than linger for its idle time)."""
    return os.path.exists(sys.executable) and os.path.exists(__file__)


def _leave_the_starter() -> None:
    """Keep nothing of the call that started this helper: its descriptors above 2 (a
    caller's pipe on fd 3 would never see end-of-file, an flock held around bin/cpi would
    stay held) and its working directory."""
    try:
        limit = os.sysconf("SC_OPEN_MAX")
    except (OSError, ValueError):
        limit = 1 << 16
    os.closerange(3, limit if limit > 0 else 1 << 16)  # close_range(2) where the kernel has it
    os.chdir("/")


def serve(idle: float, warm_up: Callable[[], None], run: Run) -> None:
    """The helper's life: `warm_up()`, listen, fork a worker per request that runs
    `run(argv, stdin)` (cpi.rpc.serve, the cold call: passed in, so the server imports no
    part of the wire) and exits with its code; exit when
    idle, stale, replaced or asked to."""
    import fcntl
    import select
    import signal
    import time

    _leave_the_starter()
    started_ns = time.time_ns() - 1_000_000_000  # a coarse file system clock: a second's margin
    directory, path = socket_dir(), socket_path()
    if not private_dir_ok(directory):
        return
    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another helper of this install lives
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))  # `stop`: clean up on the way out
    warm_up()
    stale = _staleness(started_ns)
    if stale is None:
        return  # changed while it was being loaded: the next cold call starts a fresh helper
    import socket

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    staging = f"{path}.{os.getpid()}"
    try:
        os.unlink(staging)
    except FileNotFoundError:
        pass
    listener.bind(staging)
    listener.listen(128)
    os.rename(staging, path)  # atomically: a client finds a ready helper or none
    inode = os.stat(path).st_ino
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    connections: dict[int, tuple] = {}  # worker pid -> its client's connection, its pid, stopped by us
    last = time.monotonic()
    try:
        while True:
            ready, _, _ = select.select([listener.fileno(), wake_read], [], [], min(5.0, idle))
            _reap(connections)
            if wake_read in ready:
                os.read(wake_read, 4096)
            if listener.fileno() in ready:
                last = time.monotonic()
                try:
                    connection, _ = listener.accept()
                except OSError:
                    continue
                try:
                    if peer_uid(connection) != os.getuid():
                        connection.close()
                        continue
                    client = peer_pid(connection)
                    if stale():
                        connection.sendall(b"R stale\n")
                        connection.close()
                        return
                    sys.stdout.flush()
                    sys.stderr.flush()
                    pid = os.fork()
                except OSError:  # the client went away, or no fork now: it makes the call itself
                    connection.close()
                    continue
                if pid == 0:
                    listener.close()
                    os.close(wake_read)
                    os.close(wake_write)
                    os.close(lock)
                    for other, *_ in connections.values():
                        other.close()  # other calls' clients must see their connection end without us
                    _work(connection, run)  # never returns
                connections[pid] = (connection, client, False)
            elif time.monotonic() - last >= idle:
                return
            if not _install_present():
                return
            try:
                if os.stat(path).st_ino != inode:
                    return  # replaced by another helper, or removed
            except OSError:
                return
    finally:
        try:
            if os.stat(path).st_ino == inode:
                os.unlink(path)
            os.unlink(path + ".lock")  # held until exit: a starter that opened it before cannot start a twin
        except (OSError, UnboundLocalError):
            pass
        for connection, *_ in connections.values():
            connection.close()


def _reap(connections: dict) -> None:
    """Tell each finished worker's client how it ended ("X code" or "K signal"), and mirror
    each worker's stops and continuations on its client, here, in the order they came: a
    client that stopped itself could miss the continuation and stay stopped for ever."""
    import signal

    while connections:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG | os.WUNTRACED | os.WCONTINUED)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid not in connections:
            continue
        connection, client, stopped = connections[pid]
        mirror: signal.Signals | None
        if os.WIFSTOPPED(status):
            message, mirror = f"T{os.WSTOPSIG(status)}\n", signal.SIGSTOP
        elif os.WIFCONTINUED(status):
            message, mirror = "C\n", signal.SIGCONT
        else:  # ended: a client the helper stopped is continued to read how
            message = f"K{os.WTERMSIG(status)}\n" if os.WIFSIGNALED(status) else \
                f"X{os.waitstatus_to_exitcode(status)}\n"
            mirror = signal.SIGCONT if stopped else None
        try:
            connection.sendall(message.encode())
        except OSError:
            pass
        if mirror is not None:
            try:
                os.kill(client, mirror)
            except OSError:
                pass
        if message[0] in "XK":
            connections.pop(pid)[0].close()
        else:
            connections[pid] = (connection, client, mirror == signal.SIGSTOP)


def _work(connection: _socket.socket, run: Run) -> None:
    """A worker: take on the client's descriptors, directory, environment, umask and argv,
    announce itself, wait for "G", run the call as a cold bin/cpi would, exit with its
    code."""
    import signal

    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        connection.settimeout(REQUEST_TIMEOUT)  # a connection that sends nothing parks no worker
        header, body = _receive_request(connection)
        if header.get("stop"):
            connection.sendall(b"stopped\n")
            os.kill(os.getppid(), signal.SIGTERM)
            os._exit(0)
        connection.sendall(f"S {os.getpid()}\n".encode())
        go, fds = _receive_go(connection)
        connection.settimeout(None)
        if go != b"G" or len(fds) != 4:
            for fd in fds:
                os.close(fd)
            os._exit(0)  # the client gave up waiting and made the call itself
        _watch_client(connection)
        _report_fatal_signals(connection)
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        os.fchdir(fds[3])
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.umask(header["umask"])
        os.environ.clear()
        os.environ.update(header["env"])
        import time

        time.tzset()  # TZ as the client has it
        sys.argv = ["-c", *header["argv"]]
        try:
            code = run(header["argv"], (body, header["stdin_problem"]))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - a worker never returns into the helper's loop
        code = code or 1
    try:
        connection.sendall(f"X{code}\n".encode())
    except OSError:
        pass
    os._exit(code)


def _report_fatal_signals(connection: _socket.socket) -> None:
    """Tell the client, before dying of it, of a signal that ends a cold process (SIGTERM,
    SIGHUP): the helper says so too, but a helper killed first cannot, and the client must
    still die alike. SIGKILL leaves no word: the client reads the silence as it
    (cpi.warm.client.call)."""
    import signal

    def report(signum: int, frame: object) -> None:
        try:
            connection.sendall(f"K{signum}\n".encode())
        except OSError:  # the client is gone already: nobody is left to tell, the worker dies all the same
            pass
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, report)


def _watch_client(connection: _socket.socket) -> None:
    """End this worker the moment its client ends: a client killed by SIGKILL (which it
    cannot pass on) would otherwise leave its call running in the background, holding its
    locks, as a cold process killed there never would. The client sends nothing after "G":
    a read that returns means it is gone."""
    import signal
    import threading

    def watch() -> None:
        try:
            while connection.recv(1):
                pass
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="cpi-client-watch", daemon=True).start()


def _receive_request(connection: _socket.socket) -> tuple[dict, bytes]:
    import json

    received = bytearray()
    size = int.from_bytes(_receive_exactly(connection, received, 4), "big")
    if size > MAX_HEADER:
        raise OSError("request header too large")
    header = json.loads(_receive_exactly(connection, received, size))
    if not 0 <= header.get("stdin", 0) <= MAX_STDIN:
        raise OSError("request body too large")
    stdin = _receive_exactly(connection, received, header.get("stdin", 0))
    return header, stdin


def _receive_go(connection: _socket.socket) -> tuple[bytes, list[int]]:
    """The client's "G" and the descriptors that come with it (b"" if it went away)."""
    data, ancillary, _, _ = connection.recvmsg(1, _socket.CMSG_SPACE(4 * 4))
    fds = []
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += [int.from_bytes(payload[i:i + 4], NATIVE, signed=True) for i in range(0, len(payload) - 3, 4)]
    return data, fds


def _receive_exactly(connection: _socket.socket, received: bytearray, size: int) -> bytes:
    """The next `size` bytes: what `received` holds of them first, then off the socket."""
    while len(received) < size:
        chunk = connection.recv(min(1 << 20, max(65536, size - len(received))))
        if not chunk:
            raise OSError("short request")
        received += chunk
    data = bytes(received[:size])
    del received[:size]
    return data
