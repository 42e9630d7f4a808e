"""Where a helper listens and whom it serves: the settings, the socket's directory and
name, and the peer checks, shared by the client and the server (standard library only: the
client imports this before `site`)."""

from __future__ import annotations

import _socket
import os
import sys

#: The environment variable that sets the helper's idle time in seconds: 0 turns it off
#: (the job's `helper_idle_timeout` property exports it).
ENABLE = "CPI_HELPER_IDLE_TIMEOUT"
#: The idle time when the variable is not set: on by default.
DEFAULT_IDLE = 600.0
#: How long a client waits for its worker's "S" before it makes the call itself.
START_TIMEOUT = 2.0
#: How long a worker waits for its client's request, then for its "G", before it closes
#: the connection and exits: a real client sends each at once, so only a connection that
#: sends nothing (or stalls) meets it, and it must not hold a worker for the idle time.
REQUEST_TIMEOUT = 5.0
#: The longest request header (argv, environment, umask) a helper reads.
MAX_HEADER = 1 << 20
#: The most request bytes a client sends: what cpi.rpc.read_all reads at most (its
#: REQUEST_LIMIT and one byte more, which parse_request refuses). Not imported from the wire,
#: which this package stays below; tests/conformance/test_wire.py checks the two agree.
MAX_STDIN = (32 << 20) + 1
NATIVE = sys.byteorder


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


def _fnv1a(text: str) -> str:
    """A short stable name for a path (hashlib costs a few ms to import)."""
    value = 0xCBF29CE484222325
    for byte in text.encode("utf-8", "surrogateescape"):
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


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


def peer_pid(sock: _socket.socket) -> int:
    return int.from_bytes(sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)[:4], NATIVE)


def peer_uid(sock: _socket.socket) -> int:
    credentials = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    return int.from_bytes(credentials[4:8], NATIVE)
