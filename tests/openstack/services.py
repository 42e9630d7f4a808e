"""Setting up the loopback OpenStack services once per test session, before the first test,
with its progress on the terminal and a time budget of its own.

tests/openstack/setup.sh takes seconds when everything is up and up to ~20 minutes on a bare
Debian (packages, databases, services, seed). Run from inside a test's fixture it shared that
test's timeout (600 s) and printed nothing until it ended. So:

- As a pytest plugin (`bin/test` passes `-p tests.openstack.services`; tests/openstack and
  tests/lifecycle load it from their conftest too), after collection: if a selected test needs
  the services, setup.sh runs now, outside any test, each line of its output shown as it
  comes (with the time since it started, and a "still running" line when it is quiet), under
  `CPI_OPENSTACK_SETUP_TIMEOUT` seconds (default 1500). `bin/test tests/unit` selects none, so
  it sets nothing up.
- The outcome is kept for the session: target.py uses it, and the tests that need the
  services skip with its reason when it failed.
- Outside the plugin (plain `pytest tests/faults/test_storm_openstack.py`), target.py runs the
  same set-up itself, its output going to stderr as it comes (shown live with `-s`).

`CPI_TEST_OPENSTACK=0` skips the set-up (the tests that need it skip, saying so);
`CPI_LIFECYCLE_OPENSTACK_CONFIG` (a real cloud) needs none.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.support import progress

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "tests" / "openstack" / "setup.sh"
STATE_DIR = Path(os.environ.get("OS_STATE_DIR", "/var/tmp/cpi-openstack"))
REAL_CLOUD_ENV = "CPI_LIFECYCLE_OPENSTACK_CONFIG"
SWITCH_ENV = "CPI_TEST_OPENSTACK"
TIMEOUT_ENV = "CPI_OPENSTACK_SETUP_TIMEOUT"
DEFAULT_TIMEOUT = 1500.0


@dataclass(frozen=True)
class Outcome:
    ok: bool
    reason: str = ""
    seconds: float = 0.0


_outcome: Outcome | None = None


def outcome() -> Outcome | None:
    """The set-up's outcome in this session, None when it has not run."""
    return _outcome


def budget() -> float:
    try:
        return float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT)
    except ValueError:
        return DEFAULT_TIMEOUT


def cannot_run_here() -> str | None:
    """Why the loopback services cannot be set up on this machine, if they cannot."""
    if os.environ.get(SWITCH_ENV, "").strip().lower() in ("0", "no", "false", "off"):
        return f"the OpenStack set-up is switched off ({SWITCH_ENV}=0)"
    if os.geteuid() != 0:
        return (f"the loopback OpenStack services need root (tests/openstack/setup.sh); "
                f"or set {REAL_CLOUD_ENV} to test against a real cloud")
    if not Path("/etc/debian_version").exists():
        return (f"the loopback OpenStack services need Debian (bookworm) packages; "
                f"or set {REAL_CLOUD_ENV} to test against a real cloud")
    if not SETUP.exists():
        return f"{SETUP} is missing"
    return None


def ensure(show: Callable[[str], None] | None = None) -> Outcome:
    """Run setup.sh once for this session (or return the outcome of the run there was);
    `show` receives each progress line as it comes."""
    global _outcome
    if _outcome is None:
        reason = cannot_run_here()
        _outcome = Outcome(False, reason) if reason else _run(show or progress.to_stderr)
    return _outcome


def _run(show: Callable[[str], None]) -> Outcome:
    limit = budget()
    started = time.monotonic()

    def say(text: str) -> None:
        show(f"[openstack set-up {time.strftime('%H:%M:%S')} +{time.monotonic() - started:.0f}s] {text}")

    say(f"running tests/openstack/setup.sh (budget {limit:.0f}s, {TIMEOUT_ENV}; seconds when all is up, "
        "up to ~20 minutes on a bare machine)")
    # the services outlive the run: they start with the machine's environment, not the run's
    # own HOME and TMPDIR (tests/support/suite.py), which a passing run removes
    from tests.support import suite

    env = suite.outside_env(OS_STATE_DIR=str(STATE_DIR), DEBIAN_FRONTEND="noninteractive")
    done = progress.run(["bash", str(SETUP)], budget=limit, say=say, env=env)
    if done.returncode is None:
        reason = f"tests/openstack/setup.sh did not finish within {limit:.0f}s ({TIMEOUT_ENV})"
        say(reason)
        return Outcome(False, _with_tail(reason, done.tail), done.seconds)
    seconds = done.seconds
    if not done.ok:
        reason = f"tests/openstack/setup.sh failed (exit {done.returncode}) after {seconds:.0f}s"
        say(reason)
        return Outcome(False, _with_tail(reason, done.tail), seconds)
    state = STATE_DIR / "cpi-openstack.json"
    if not state.exists():
        return Outcome(False, f"tests/openstack/setup.sh finished but wrote no {state}", seconds)
    say(f"OpenStack services ready ({seconds:.0f}s)")
    return Outcome(True, "", seconds)


def _with_tail(reason: str, tail: tuple[str, ...]) -> str:
    return reason + ("; its last lines:\n" + "\n".join(tail) if tail else "")


# ---------------------------------------------------------------- as a pytest plugin


def needs_services(item) -> bool:
    """Whether a collected test uses the loopback services: the lifecycle scenarios of the
    openstack target, and the OpenStack tests that use the `cloud` fixture (tests whose
    module names OpenStack but that need no services, such as the unit tests, do not)."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("target") == "openstack":
        return True
    path = Path(str(item.path))
    return (("openstack" in path.name or path.parent.name == "openstack")
            and "cloud" in getattr(item, "fixturenames", ()))


def pytest_collection_finish(session) -> None:
    config = session.config
    if _outcome is not None or config.option.collectonly or os.environ.get(REAL_CLOUD_ENV):
        return
    if not any(needs_services(item) for item in session.items):
        return

    def work(show) -> None:
        result = ensure(show)
        if not result.ok:
            show(f"OpenStack tests will skip: {result.reason.splitlines()[0]}")

    progress.on_terminal(config, work)
