"""A real vSphere API on 127.0.0.1 for the tests: VMware's simulator (vcsim), built here
from Debian's govmomi library, installed as root when missing (as redis_server.py does with
redis-server), started on a free port with a user and password, stopped after.

Debian ships govmomi's `simulator` package but no vcsim command: tests/vsphere/vcsim/main.go
is a small one. It is built in GOPATH mode against a copy of the simulator package in an
overlay GOPATH, patched by tests/vsphere/vcsim/patch.py where 0.24 answers otherwise than
vSphere does (never /usr/share itself). The binary is cached under CPI_VCSIM_CACHE (default
/var/tmp/cpi-vcsim-UID, private to this user) and rebuilt only when main.go, the patch or the
Debian packages change: the key is their hash. docs/testing.md says what it costs.

The set-up (install, build) runs once per session, before the first test that uses the
`vcsim` fixture (this module is a pytest plugin: bin/test passes `-p tests.support.vcsim`, and
tests/vsphere/conftest.py imports its hook), its progress shown as it comes, under a budget of
its own: CPI_VCSIM_SETUP_TIMEOUT seconds (default 900), not a test's timeout. When it fails as
root on Debian, where it can work, the tests that need it fail with the reason; elsewhere
(not root and the packages missing) they skip, saying why. CPI_TEST_VSPHERE=0 switches it off.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import progress

PACKAGES = ("golang-go", "golang-github-vmware-govmomi-dev")
#: Debian's GOPATH; the overlay GOPATH before it holds a patched copy of govmomi
SYSTEM_GOPATH = Path("/usr/share/gocode")
GOVMOMI_IMPORT = "github.com/vmware/govmomi"
SIMULATOR_IMPORT = f"{GOVMOMI_IMPORT}/simulator"
TIMEOUT_ENV = "CPI_VCSIM_SETUP_TIMEOUT"
DEFAULT_TIMEOUT = 900.0
SWITCH_ENV = "CPI_TEST_VSPHERE"
CACHE_ENV = "CPI_VCSIM_CACHE"
#: a build of other sources (another checkout, an older commit) is removed once unused this long
KEEP_UNUSED_SECONDS = 7 * 24 * 3600
#: What the server is started with: a user of its own (the default, user/pass, is not it).
USERNAME = "cpi-test"


@dataclass(frozen=True)
class Outcome:
    ok: bool
    reason: str = ""
    binary: Path | None = None
    #: a failure the run must not hide: this machine could have had the simulator
    required: bool = False


_outcome: Outcome | None = None


def outcome() -> Outcome | None:
    return _outcome


def budget() -> float:
    try:
        return float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT)
    except ValueError:
        return DEFAULT_TIMEOUT


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or f"/var/tmp/cpi-vcsim-{os.geteuid()}")


def prepare(show=None) -> Outcome:
    """Install and build once per session (or return how that went); `show` receives each
    progress line as it comes."""
    global _outcome
    if _outcome is None:
        _outcome = _prepare(show or progress.to_stderr)
    return _outcome


def _prepare(show) -> Outcome:
    started = time.monotonic()
    deadline = started + budget()

    def say(text: str) -> None:
        show(f"[vsphere set-up {time.strftime('%H:%M:%S')} +{time.monotonic() - started:.0f}s] {text}")

    if os.environ.get(SWITCH_ENV, "").strip().lower() in ("0", "no", "false", "off"):
        return Outcome(False, f"the vSphere simulator is switched off ({SWITCH_ENV}=0)")
    missing = _missing()
    if missing:
        if not _can_install():
            return Outcome(False, f"the vSphere simulator needs Debian's {' '.join(PACKAGES)} ({missing} is "
                                  "missing) and this is not root on a Debian machine, which installs them")
        failure = _install(say, deadline)
        if failure:
            return Outcome(False, failure, required=True)
        missing = _missing()
        if missing:
            return Outcome(False, f"{missing} is still missing after installing {' '.join(PACKAGES)}", required=True)
    try:
        binary = _build(say, deadline)
    except (BuildFailed, OSError) as exc:
        say(str(exc).splitlines()[0])
        return Outcome(False, str(exc), required=True)
    return Outcome(True, binary=binary)


def _missing() -> str | None:
    if not shutil.which("go"):
        return "the go command (golang-go)"
    if not (SYSTEM_GOPATH / "src" / SIMULATOR_IMPORT).is_dir():
        return f"{SYSTEM_GOPATH / 'src' / SIMULATOR_IMPORT} (golang-github-vmware-govmomi-dev)"
    return None


def _can_install() -> bool:
    return os.geteuid() == 0 and Path("/etc/debian_version").exists() and bool(shutil.which("apt-get"))


def _install(say, deadline: float) -> str | None:
    """None once the packages are installed, else why not."""
    from tests.support import suite

    env = suite.outside_env(DEBIAN_FRONTEND="noninteractive")  # apt outlives the run: not in its dirs
    install = ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]
    tail: tuple[str, ...] = ()
    for attempt in (install, ["apt-get", "update"], install):  # the package lists may be stale: update once
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        say(f"running {' '.join(attempt)} (budget {remaining:.0f}s left, {TIMEOUT_ENV})")
        done = progress.run(attempt, budget=remaining, say=say, env=env)
        tail = done.tail
        if done.returncode is None:
            break
        if attempt is install and done.ok:
            say(f"installed {' '.join(PACKAGES)} ({done.seconds:.0f}s)")
            return None
    reason = f"could not install {' '.join(PACKAGES)} within {budget():.0f}s ({TIMEOUT_ENV})"
    return reason + ("; the last lines:\n" + "\n".join(tail) if tail else "")


# ---------------------------------------------------------------- the build


class BuildFailed(Exception):
    pass


def _build(say, deadline: float) -> Path:
    """The simulator binary for this checkout's sources, built when the cache lacks it."""
    from cpi.errors import CpiError
    from cpi.private import private_dir
    from tests.vsphere.vcsim import patch

    try:
        cache = private_dir(cache_dir(), CACHE_ENV)
    except CpiError as exc:
        raise BuildFailed(f"the vSphere simulator's build cache: {exc}") from None
    key = _key(patch.HERE, patch.sources())
    binary = cache / key / "vcsim"
    if binary.exists():
        os.utime(binary.parent)  # in use: kept by the other checkouts' clean-ups (below)
        say(f"vcsim is built ({binary})")
        return binary
    lock = os.open(cache / ".build.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session's build: wait for it
        if not binary.exists():
            _compile(cache, binary, patch, say, deadline)
        _prune(cache, key)
    finally:
        os.close(lock)
    return binary


def _prune(cache: Path, key: str) -> None:
    """Remove what a killed build left (a build runs under the lock) and the builds of other
    keys unused for KEEP_UNUSED_SECONDS: those of other checkouts on this machine are in use,
    and a binary removed between another run's check and its start would fail that run."""
    unused = time.time() - KEEP_UNUSED_SECONDS
    for old in cache.iterdir():
        other = old.name != key and len(old.name) == len(key) and all(c in "0123456789abcdef" for c in old.name)
        if old.name.startswith("build-") or (other and old.stat().st_mtime < unused):
            shutil.rmtree(old, ignore_errors=True)


def _key(root: Path, sources: list[Path]) -> str:
    """The hash of what the binary is made of: this checkout's sources (under `root`), the
    Go toolchain and the installed govmomi."""
    digest = hashlib.sha256()
    for source in sources:
        digest.update(f"{source.relative_to(root)}\0".encode())
        digest.update(source.read_bytes())
    versions = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version}\n", *PACKAGES],
                              capture_output=True, text=True) if shutil.which("dpkg-query") else None
    digest.update((versions.stdout if versions is not None else "not a Debian package").encode())
    go = subprocess.run(["go", "version"], capture_output=True, text=True)
    digest.update(go.stdout.encode())
    return digest.hexdigest()[:24]


def _compile(cache: Path, binary: Path, patch, say, deadline: float) -> None:
    work = Path(tempfile.mkdtemp(prefix="build-", dir=cache))
    try:
        overlay = work / "gopath"
        # all of govmomi, not its simulator alone: GOPATH mode takes a package from the first
        # GOPATH entry that has its directory, and govmomi's root package would be one left empty
        source = SYSTEM_GOPATH / "src" / GOVMOMI_IMPORT
        say(f"copying {source} to an overlay GOPATH and patching its simulator")
        shutil.copytree(source, overlay / "src" / GOVMOMI_IMPORT, symlinks=True)
        try:
            changes = patch.apply(overlay / "src" / SIMULATOR_IMPORT)
        except patch.PatchError as exc:
            raise BuildFailed(f"patching the simulator: {exc}") from None
        for change in changes:
            say(f"  {change}")
        shutil.copyfile(patch.HERE / "main.go", work / "main.go")
        (work / "tmp").mkdir()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(work),  # nothing of Go's lands in a real home
            "GOPATH": f"{overlay}:{SYSTEM_GOPATH}",  # the patched govmomi first; Debian's for what it uses
            "GO111MODULE": "off",
            "GOCACHE": str(work / "gocache"),
            "GOFLAGS": "",
            "CGO_ENABLED": "0",  # no C compiler needed, and a static binary
            "TMPDIR": str(work / "tmp"),
        }
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise BuildFailed(f"no time left to build vcsim ({TIMEOUT_ENV})")
        say(f"building vcsim: go build (GOPATH mode; budget {remaining:.0f}s left)")
        done = progress.run(["go", "build", "-o", str(work / "vcsim"), "main.go"], budget=remaining, say=say,
                            env=env, cwd=str(work))
        if not done.ok:
            what = "did not finish in time" if done.returncode is None else f"failed (exit {done.returncode})"
            raise BuildFailed(f"building vcsim {what} after {done.seconds:.0f}s; the last lines:\n"
                              + "\n".join(done.tail))
        binary.parent.mkdir(mode=0o700)
        os.replace(work / "vcsim", binary)
        say(f"built vcsim in {done.seconds:.0f}s ({binary})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------- the server


class Vcsim:
    """One simulator process: a vCenter with datacenter DC0, cluster DC0_C0 and a standalone
    host, datastores LocalDS_0 and LocalDS_1 (directories under its own temp dir), "VM
    Network" and the distributed port group DC0_DVPG0, and four VMs."""

    def __init__(self, binary: Path, timeout: float = 30.0, args: tuple[str, ...] = ()):
        self.username = USERNAME
        self.password = secrets.token_urlsafe(12)
        # its TMPDIR: the datastores' directories go there, and all of it goes at stop()
        self.directory = Path(tempfile.mkdtemp(prefix="cpi-test-vcsim-"))
        self.log = self.directory / "vcsim.log"
        env = {**os.environ, "TMPDIR": str(self.directory),
               "VCSIM_USERNAME": self.username, "VCSIM_PASSWORD": self.password}
        with open(self.log, "wb") as log:
            # stdin stays open: when this process dies without stop(), the simulator sees EOF and exits
            self.process = subprocess.Popen([str(binary), "-listen", "127.0.0.1:0", *args], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=log, env=env)
        try:
            self.url = self._announced(time.monotonic() + timeout)
            self._wait_answers(time.monotonic() + timeout)
        except BaseException:
            self.stop()
            raise
        hostport = self.url.split("/")[2]
        self.host, port = hostport.rsplit(":", 1)
        self.port = int(port)

    def _failed(self, why: str) -> RuntimeError:
        return RuntimeError(f"vcsim {why}: {self.log.read_text(errors='replace')[-2000:]}")

    def _announced(self, deadline: float) -> str:
        """The URL of the line it prints once it listens."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        os.set_blocking(fd, False)
        seen = b""
        while b"\n" not in seen:
            if self.process.poll() is not None:
                raise self._failed(f"exited with {self.process.returncode} before listening")
            if time.monotonic() > deadline:
                raise self._failed("printed no address in time")
            try:
                chunk = os.read(fd, 4096)
            except BlockingIOError:
                time.sleep(0.02)
                continue
            if not chunk:
                raise self._failed("closed its output before listening")
            seen += chunk
        line = seen.split(b"\n", 1)[0].decode()
        prefix = "vcsim listening on "
        if not line.startswith(prefix):
            raise self._failed(f"printed {line!r}, not its address")
        return line.removeprefix(prefix).strip()

    def _wait_answers(self, deadline: float) -> None:
        """Until /about answers over HTTPS (its certificate is its own: not checked)."""
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        about = self.url.rsplit("/", 1)[0] + "/about"
        while True:
            try:
                with urllib.request.urlopen(about, context=context, timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise self._failed(f"did not answer on {about}: {exc}") from None
            if self.process.poll() is not None:
                raise self._failed(f"exited with {self.process.returncode}")
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM (it removes its datastores' directories), SIGKILL when it does not go."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def server(*args: str) -> Vcsim:
    """A running simulator (started with main.go's flags `args`); the calling test skips or
    fails (per prepare()) when there can be none."""
    result = prepare()
    if not result.ok:
        if result.required:
            pytest.fail(f"the vSphere simulator could not be set up: {result.reason}", pytrace=False)
        pytest.skip(result.reason)
    assert result.binary is not None
    return Vcsim(result.binary, args=args)


@contextlib.contextmanager
def running(*args: str):
    """A simulator of its own (main.go's flags `args`), stopped afterwards."""
    started = server(*args)
    try:
        yield started
    finally:
        started.stop()


@contextlib.contextmanager
def service_instance(running: Vcsim):
    """A pyVmomi ServiceInstance logged in to `running`, logged out afterwards."""
    from pyVim.connect import Disconnect, SmartConnect

    instance = SmartConnect(host=running.host, port=running.port, user=running.username, pwd=running.password,
                            disableSslCertValidation=True)
    try:
        yield instance
    finally:
        Disconnect(instance)


# ---------------------------------------------------------------- as a pytest plugin


def needs_vcsim(item) -> bool:
    """A test that uses the simulator: by the `vcsim` fixture, or as the vsphere lifecycle target."""
    callspec = getattr(item, "callspec", None)
    return "vcsim" in getattr(item, "fixturenames", ()) or (
        callspec is not None and callspec.params.get("target") == "vsphere")


def pytest_collection_finish(session) -> None:
    """The install and build before the first test that needs them, outside every test's
    timeout, with their progress on the terminal."""
    config = session.config
    if _outcome is not None or config.option.collectonly:
        return
    if not any(needs_vcsim(item) for item in session.items):
        return

    def work(show) -> None:
        result = prepare(show)
        if not result.ok:
            verb = "fail" if result.required else "skip"
            show(f"the vSphere tests will {verb}: {result.reason.splitlines()[0]}")

    progress.on_terminal(config, work)
