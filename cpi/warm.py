"""The warm helper: a per-user fork server, so a call need not import pydantic, the models
and its cloud afresh (issue #12: ~100 ms of every cold call; a local method within 3x the
bare interpreter's start).

On by default; CPI_HELPER_IDLE_TIMEOUT=<seconds> sets its idle time, 0 turns it off. Then
bin/cpi is a small client (this module, standard library only, imported before anything
else):

- it connects to the helper's Unix socket, in ~/.cache/bosh-cpi/helper (0700, its own user's,
  which it checks: owner, mode, not a link; an unsafe one is named on stderr and the call is
  made cold), and checks the helper's uid (SO_PEERCRED);
- it reads the request off its stdin (an `info` it then answers itself: that is quicker
  than handing it over), and passes the request, its stdin, stdout and stderr (SCM_RIGHTS),
  its working directory (an fd), its argv, environment and umask; the helper forks a worker
  that takes them all on and runs the very code a cold bin/cpi runs (cpi.rpc.serve) on the
  client's own descriptors: the same response, the same log lines on the same stderr, the
  same exit code;
- the worker announces itself ("S pid"); the client answers "G" (go), with its
  descriptors; only then does the worker begin the call. Until "S" nothing is done and no
  descriptor has left the client, so a missing, refusing, stale, dead or slow helper (no
  "S" within START_TIMEOUT) means the client makes the call itself, cold: the same answer,
  never an error. A late worker sees the client gone instead of "G" and exits without
  acting;
- the exit status reaches the client from the helper (which reaps its workers) or from the
  worker itself ("X code"); a worker killed by a signal ("K sig") kills the client with the
  same signal, as a cold process killed there would have died. The helper mirrors each of
  its worker's stops and continuations on the client itself, in the order they come (a
  worker continued directly, or killed while stopped, never leaves its client stopped), and
  continuing the client continues the worker. SIGTERM, SIGINT and SIGHUP sent to the client
  are passed on to its worker; a client that ends any other way (SIGKILL) ends its worker
  at once: the worker watches its connection, and each worker holds only its own client's
  connection (never another call's).

A cold call whose helper is missing starts one (detached, its stdio on /dev/null, after the
response is written); the helper closes every other descriptor it inherited and moves to
"/", keeping nothing of that call. It imports and builds everything a call needs before it
listens, forks one worker per request (parallel calls stay parallel; no state passes from
one call to the next: each worker starts from the helper's pristine memory), refuses calls
and exits when what it serves changed on disk (a file of the CPI's own code, or a
directory of its import path: a dependency or plugin installed; a change made while it was
still loading counts too), exits within seconds once its install is gone, and exits after
the idle time. Config files are read by each worker, as by each cold call: nothing of
a config is kept.

Differences from a cold process that remain: the worker's pid and parent, its session and
process group, and its resource limits and supplementary groups (the helper's).
"""

from __future__ import annotations

import os
import sys

import _socket

#: The environment variable that sets the helper's idle time in seconds: 0 turns it off
#: (the job's `helper_idle_timeout` property exports it).
ENABLE = "CPI_HELPER_IDLE_TIMEOUT"
#: The idle time when the variable is not set: on by default.
DEFAULT_IDLE = 600.0
#: How long a client waits for its worker's "S" before it makes the call itself.
START_TIMEOUT = 2.0
#: The longest request header (argv, environment, umask) a helper reads.
MAX_HEADER = 1 << 20
_NATIVE = sys.byteorder


def idle_timeout() -> float:
    """The helper's idle time from the environment (DEFAULT_IDLE when unset); 0 when off
    (0, negative, or not a number: a setting that cannot be read turns the helper off
    rather than guess)."""
    setting = os.environ.get(ENABLE)
    if setting is None:
        return DEFAULT_IDLE
    try:
        value = float(setting)
    except ValueError:
        return 0.0
    return value if 0 < value < float("inf") else 0.0


# ---------------------------------------------------------------- where the helper listens


def _fnv1a(text: str) -> str:
    """A short stable name for a path (hashlib costs a few ms to import)."""
    value = 0xCBF29CE484222325
    for byte in text.encode("utf-8", "surrogateescape"):
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


def install_root() -> str:
    """The directory the `cpi` package is imported from (the checkout, or site-packages)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def socket_dir() -> str:
    """~/.cache/bosh-cpi/helper, in the CPI user's own home (HOME, else the password
    database's: a director gives no HOME), where the CPI's other private dirs are. Not a
    fixed name in /tmp: any local user could make that first and so turn the helper off
    for root, silently."""
    home = os.environ.get("HOME")
    if not home:
        import pwd

        home = pwd.getpwuid(os.getuid()).pw_dir
    return f"{home.rstrip('/')}/.cache/bosh-cpi/helper"


#: The import path this process started with (this module is imported before a call adds
#: site-packages): a helper serves only clients that import from the same places, and
#: starts with this path itself.
IMPORT_PATH = list(sys.path)


def socket_path() -> str:
    """One helper per user, interpreter and import path (so per install: other checkouts,
    versions and plugin paths get their own)."""
    key = "\0".join([os.path.realpath(sys.executable), sys.version, *IMPORT_PATH])
    return f"{socket_dir()}/{_fnv1a(key)}.sock"


def private_dir_ok(path: str) -> bool:
    """The directory is ours alone: a real directory (not a link), owned by this user, that
    no one else may enter or write."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (st.st_mode & 0o170000) == 0o040000 and st.st_uid == os.getuid() and not st.st_mode & 0o077


def _peer_pid(sock) -> int:
    return int.from_bytes(sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)[:4], _NATIVE)


def _peer_uid(sock) -> int:
    credentials = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    return int.from_bytes(credentials[4:8], _NATIVE)


# ---------------------------------------------------------------- the client


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
        if _peer_uid(sock) != os.getuid():
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
            rights = b"".join(fd.to_bytes(4, _NATIVE, signed=True) for fd in (0, 1, 2, cwd))
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
        while not (status.startswith("X") or status.startswith("K")):
            status = reader.line()
    except OSError:
        status = ""
    sock.close()
    if status.startswith("K"):
        _die_like(int(status[1:]))
    return int(status[1:]) if status.startswith("X") else 1


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _send_request(sock, header: dict, body: bytes = b"") -> None:
    """The header (length, JSON), then `body` (the request's bytes)."""
    from cpi import strict_json

    data = strict_json.dumps(header).encode("ascii")
    sock.sendall(len(data).to_bytes(4, "big") + data + body)


class _Lines:
    """Newline-ended messages off a stream socket."""

    def __init__(self, sock):
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
    import _signal

    def forward(signum, frame):
        try:
            os.kill(worker, signum)
        except OSError:
            pass

    for signum in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP, _signal.SIGCONT):
        _signal.signal(signum, forward)


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
        return _peer_uid(sock) == os.getuid()
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
                "from cpi.rpc import helper; helper(float(sys.argv[1]), json.loads(sys.argv[2]))")
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


# ---------------------------------------------------------------- the helper


def _own_files(since_ns: int) -> dict[str, tuple[int, int]] | None:
    """mtime and size of what the helper serves: every file of the CPI's own code it
    loaded, and every directory of its import path (site-packages, a plugin path: pip
    adds and removes entries there when it installs or upgrades a dependency or a plugin).
    None when one of them changed at or after `since_ns` (the helper's start): a file
    edited while the helper was importing it (a `git pull` during the first call) must
    not be served as it was read."""
    root = install_root() + os.sep + "cpi" + os.sep
    paths = [getattr(m, "__file__", None) for m in list(sys.modules.values())]
    paths = [p for p in paths if p and p.startswith(root)]
    paths += [d for d in sys.path if d and os.path.isdir(d)]
    found = {}
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if st.st_mtime_ns >= since_ns:
            return None
        found[path] = (st.st_mtime_ns, st.st_size)
    return found


def _unchanged(files: dict[str, tuple[int, int]]) -> bool:
    for path, (mtime, size) in files.items():
        try:
            st = os.stat(path)
        except OSError:
            return False
        if (st.st_mtime_ns, st.st_size) != (mtime, size):
            return False
    return True


def _install_present() -> bool:
    """The interpreter and the CPI's code are still there (`bosh delete-env` removes the
    package: a helper of a removed install exits rather than linger for its idle time)."""
    return os.path.exists(sys.executable) and os.path.exists(os.path.join(install_root(), "cpi", "warm.py"))


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


def serve(idle: float, warm_up, run) -> None:
    """The helper's life: `warm_up()`, listen, fork a worker per request that runs
    `run(argv, stdin)` (cpi.rpc.serve, the cold call) and exits with its code; exit when
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
    files = _own_files(started_ns)
    if files is None:
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
                    if _peer_uid(connection) != os.getuid():
                        connection.close()
                        continue
                    client = _peer_pid(connection)
                    if not _unchanged(files):
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


def _work(connection, run) -> None:
    """A worker: take on the client's descriptors, directory, environment, umask and argv,
    announce itself, wait for "G", run the call as a cold bin/cpi would, exit with its
    code."""
    import signal

    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        header, body = _receive_request(connection)
        if header.get("stop"):
            connection.sendall(b"stopped\n")
            os.kill(os.getppid(), signal.SIGTERM)
            os._exit(0)
        connection.sendall(f"S {os.getpid()}\n".encode())
        go, fds = _receive_go(connection)
        if go != b"G" or len(fds) != 4:
            for fd in fds:
                os.close(fd)
            os._exit(0)  # the client gave up waiting and made the call itself
        _watch_client(connection)
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


def _watch_client(connection) -> None:
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


def _receive_request(connection) -> tuple[dict, bytes]:
    import json

    received = bytearray()
    size = int.from_bytes(_receive_exactly(connection, received, 4), "big")
    if size > MAX_HEADER:
        raise OSError("request header too large")
    header = json.loads(_receive_exactly(connection, received, size))
    stdin = _receive_exactly(connection, received, header.get("stdin", 0))
    return header, stdin


def _receive_go(connection) -> tuple[bytes, list[int]]:
    """The client's "G" and the descriptors that come with it (b"" if it went away)."""
    data, ancillary, _, _ = connection.recvmsg(1, _socket.CMSG_SPACE(4 * 4))
    fds = []
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += [int.from_bytes(payload[i:i + 4], _NATIVE, signed=True) for i in range(0, len(payload) - 3, 4)]
    return data, fds


def _receive_exactly(connection, received: bytearray, size: int) -> bytes:
    """The next `size` bytes: what `received` holds of them first, then off the socket."""
    while len(received) < size:
        chunk = connection.recv(min(1 << 20, max(65536, size - len(received))))
        if not chunk:
            raise OSError("short request")
        received += chunk
    data = bytes(received[:size])
    del received[:size]
    return data
