"""The test run's own corner of the machine, and the check that it leaves nothing behind.

Every pytest session gets one private directory (0700, under the system temp dir) holding
a HOME, the XDG base dirs, a TMPDIR and pytest's own basetemp. The suite's environment
points there before anything else is imported, and so does the director's environment that
tests/support/runner.py gives bin/cpi: the CPI's defaults under the user's home (audit log,
throttle state, Keystone tokens, the local cloud's state dir) land in the suite's home,
never in the operator's real ~/.cache/bosh-cpi.

When the session ends, `leftovers()` names what the run left: VM processes of a local
cloud under the suite's directory, warm helpers serving this checkout or an install the
tests made, files in the suite's TMPDIR, and any change to the real ~/.cache/bosh-cpi. A
passing run removes its directory; a failing one keeps it for a look and says where.
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the real home of the user running the tests, from the password database (HOME is the
#: suite's once install() ran)
REAL_HOME = Path(pwd.getpwuid(os.getuid()).pw_dir)
REAL_CACHE = REAL_HOME / ".cache" / "bosh-cpi"
XDG = {"XDG_CACHE_HOME": ".cache", "XDG_CONFIG_HOME": ".config", "XDG_STATE_HOME": ".local/state",
       "XDG_DATA_HOME": ".local/share"}
#: the local cloud's VM processes carry this variable, naming their VM directory
VM_MARKER = b"BOSH_CPI_VM="
#: what a warm helper's command line holds (cpi.warm.client.start spawns `python -I -S -c "... helper(...)"`)
HELPER_MARK = "from cpi.warm.boot import helper"

_root: Path | None = None
#: the environment before install(): what the machine's own services must start with (a
#: MariaDB started by setup.sh from inside a run kept the run's TMPDIR as its tmpdir, and
#: failed once a passing run removed it)
ORIGINAL_ENV = dict(os.environ)


def outside_env(**extra: str) -> dict[str, str]:
    """The environment for what outlives the run (services, package installs)."""
    return {**ORIGINAL_ENV, **extra}


def root() -> Path:
    assert _root is not None, "tests.support.suite.install() has not run"
    return _root


def install() -> Path:
    """Make the suite's directory and point this process's environment at it (once)."""
    global _root
    if _root is not None:
        return _root
    _root = Path(tempfile.mkdtemp(prefix="cpi-tests-"))
    home = _root / "home"
    os.environ["HOME"] = str(home)
    for variable, relative in XDG.items():
        (home / relative).mkdir(parents=True, exist_ok=True, mode=0o700)
        os.environ[variable] = str(home / relative)
    runtime = _root / "run"
    runtime.mkdir(mode=0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    tmp = _root / "tmp"
    tmp.mkdir(mode=0o700)
    os.environ["TMPDIR"] = str(tmp)
    tempfile.tempdir = None  # re-read TMPDIR
    return _root


def director_env() -> dict[str, str]:
    """What the suite adds to the director's wiped environment: its HOME and TMPDIR (a
    director sets neither; the CPI then resolves the home from the password database,
    which for the tests would be the operator's own)."""
    return {"HOME": os.environ["HOME"], "TMPDIR": os.environ["TMPDIR"]}


def basetemp() -> Path:
    return root() / "pytest"


def snapshot(path: Path) -> dict[str, tuple[int, int]]:
    """Every entry under `path` with its size and modification time (empty when absent)."""
    found = {}
    for directory, dirs, files in os.walk(path):
        for name in dirs + files:
            entry = Path(directory, name)
            try:
                st = entry.lstat()
            except FileNotFoundError:
                continue
            found[str(entry.relative_to(path))] = (st.st_size, st.st_mtime_ns)
    return found


def _processes(under: Path | None = None, helpers: bool = True) -> list[tuple[int, str]]:
    """(pid, why it is ours) of live processes: VM processes whose VM directory is under
    `under` (default: the suite's directory) and, with `helpers`, warm helpers serving this
    checkout or an install under it."""
    ours = []
    suite = str(under or root())
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone, or not ours to read
        if state == "Z":
            continue
        variables = environ.split(b"\0")
        for variable in variables:
            if variable.startswith(VM_MARKER) and variable[len(VM_MARKER):].decode(errors="replace").startswith(suite):
                ours.append((int(entry), f"local VM process {variable.decode(errors='replace')}: {cmdline[:120]}"))
                break
        else:
            if helpers and HELPER_MARK in cmdline and (str(ROOT) in cmdline or suite in cmdline):
                ours.append((int(entry), f"warm helper: {cmdline[:160]}"))
            elif helpers and under is None and any(
                    v.split(b"=", 1)[0] in (b"HOME", b"TMPDIR") and v.split(b"=", 1)[-1].decode(errors="replace")
                    .startswith(suite) for v in variables):
                # started from inside the run (its HOME or TMPDIR), outliving it: a service that
                # should have had suite.outside_env(), or a test's process nobody stopped
                ours.append((int(entry), f"process with the run's HOME or TMPDIR: {cmdline[:160]}"))
    return ours


def stop_vms(state_dir: Path) -> list[int]:
    """Kill the local cloud's VM processes under `state_dir` (a fixture's teardown, for
    what a failing test did not delete); returns their pids."""
    pids = [pid for pid, _ in _processes(state_dir, helpers=False)]
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            continue
    return pids


def running_before() -> set[int]:
    """The processes of this kind already alive when the session starts (a helper a
    previous bin/demo left, say): not this run's."""
    return {pid for pid, _ in _processes()}


def own_helper_names(home: Path = REAL_HOME) -> set[str]:
    """The names, relative to `home`'s ~/.cache/bosh-cpi, of the helper files this
    checkout's bin/cpi would make there (its socket, lock and staging socket are named by
    a digest of its interpreter and import path: another checkout's differ)."""
    code = "import sys; sys.path.insert(0, sys.argv[1]); from cpi.warm import where; print(where.socket_path())"
    import subprocess

    path = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-I", "-S", "-c", code, str(ROOT)],
                          capture_output=True, text=True, env={"PATH": os.defpath, "HOME": str(home)},
                          cwd="/", timeout=60, check=True).stdout.strip()
    name = str(Path(path).relative_to(home / ".cache" / "bosh-cpi"))
    return {name, f"{name}.lock"}


def cache_changes(cache: Path, before: dict, own_names: set[str], marks: list[str]) -> tuple[list[str], list[str]]:
    """What changed under `cache` since `before` (snapshot()), split into what the run did
    and what it cannot have: anything else on the machine (another checkout's tests, a
    bench, an operator) may use the CPI meanwhile. An entry is the run's when it is one of
    the run's helper files (`own_names`, or a staging socket of one), when it is a file
    that names one of `marks` (the run's directory, this checkout: a config path, a state
    dir, a VM's image), or when it is a directory holding such an entry."""
    after = snapshot(cache)
    changed = sorted({name for name in set(after) | set(before) if after.get(name) != before.get(name)})

    def names_the_run(name: str) -> bool:
        if name in own_names or name.rsplit(".", 1)[0] in own_names:
            return True
        try:
            with open(cache / name, "rb") as file:
                data = file.read(1 << 20)
        except OSError:  # gone, a directory, a socket
            return False
        return any(mark.encode() in data for mark in marks)

    ours = {name for name in changed if names_the_run(name)}
    ours |= {name for name in changed if any(other.startswith(name + os.sep) for other in ours)}
    return ([f"the real {cache / name} changed: {before.get(name)} -> {after.get(name)}" for name in changed
             if name in ours],
            [f"the real {cache / name} changed meanwhile, not by this run" for name in changed if name not in ours])


def leftovers(real_cache_before: dict, before: set[int], wait: float = 15.0) -> tuple[list[str], list[str]]:
    """What the run left behind (each line one finding), and notes of what changed in the
    real ~/.cache/bosh-cpi but not by the run; processes get `wait` seconds to go (a helper
    the release tests started exits after its 5 s idle time), then are killed so that the
    next run starts clean."""
    deadline = time.monotonic() + wait
    processes = [p for p in _processes() if p[0] not in before]
    while processes and time.monotonic() < deadline:
        time.sleep(0.5)
        processes = [p for p in _processes() if p[0] not in before]
    found = [f"pid {pid}: {why}" for pid, why in processes]
    for pid, _ in processes:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            continue
    tmp = root() / "tmp"
    found += [f"left in the suite's TMPDIR: {tmp / name}" for name in sorted(os.listdir(tmp))]
    ours, others = cache_changes(REAL_CACHE, real_cache_before, own_helper_names(), [str(root()), str(ROOT)])
    return found + ours, others


def remove() -> None:
    shutil.rmtree(root(), ignore_errors=True)
