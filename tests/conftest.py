"""Session-wide: the run's own HOME, XDG dirs, TMPDIR and basetemp (tests/support/suite.py),
and at the end the check that it left nothing behind.

bin/cpi hands its calls to a warm helper by default (cpi.warm), which outlives the calls
for its idle time; the suite stops this checkout's helper when it ends. Then whatever is
left (a local VM's process, a helper, a file in the suite's TMPDIR, a change the run made to
the real ~/.cache/bosh-cpi) fails the run, named one per line (a change there that is not the
run's, say another checkout's calls meanwhile, is only noted); a clean passing run removes its
directory, a failing one keeps it and says where."""

from __future__ import annotations

import signal

import pytest

from tests.support import suite
from tests.support import vcsim as vcsim_server
from tests.support.runner import stop_helper

_start: dict = {}


def pytest_configure(config):
    # A suite started in the background of a non-interactive shell (`bin/test &`) begins
    # with SIGINT ignored, and every child inherits that: the tests that press Ctrl-C on
    # `cpi certify` would find it deaf. They need SIGINT as a terminal delivers it.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if not config.option.basetemp:
        config.option.basetemp = str(suite.basetemp())
    _start["real_cache"] = suite.snapshot(suite.REAL_CACHE)
    _start["processes"] = suite.running_before()


@pytest.fixture(scope="session", autouse=True)
def _warm_helper_stopped_at_the_end():
    yield
    stop_helper()


def pytest_sessionfinish(session, exitstatus):
    if "real_cache" not in _start:
        return
    found, notes = suite.leftovers(_start["real_cache"], _start["processes"])
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    say = reporter.write_line if reporter else print
    for line in notes:
        say(f"note: {line}")
    if found:
        say(f"the test run left {len(found)} thing(s) behind:")
        for line in found:
            say(f"  {line}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if session.exitstatus == 0:
        suite.remove()
    else:
        say(f"the run's files are kept for a look: {suite.root()}")


# the vSphere simulator, for tests/vsphere and the cross-cloud tests that run on it: here, so that
# one session starts one simulator whichever directories it runs
@pytest.fixture(scope="session")
def vcsim() -> vcsim_server.Vcsim:
    """The running simulator (url, host, port, username, password); skips or fails every test
    that uses it when it cannot be had, saying why (see tests/support/vcsim.py)."""
    with vcsim_server.running() as server:
        yield server


@pytest.fixture(scope="session")
def si(vcsim):
    """A pyvmomi ServiceInstance logged in to the simulator."""
    with vcsim_server.service_instance(vcsim) as instance:
        yield instance
