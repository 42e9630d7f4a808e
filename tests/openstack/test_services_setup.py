"""The OpenStack set-up's runner (tests/openstack/services.py), with stand-in scripts for
setup.sh: progress shown line by line as it comes, its own time budget, the reason kept."""

from __future__ import annotations

import time

import pytest

from tests.openstack import services
from tests.support import progress


@pytest.fixture
def fake_setup(tmp_path, monkeypatch):
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setattr(services, "STATE_DIR", state)

    def make(body: str):
        script = tmp_path / "setup.sh"
        script.write_text("set -eu\n" + body)
        monkeypatch.setattr(services, "SETUP", script)
        return state

    return make


def run() -> tuple[services.Outcome, list[tuple[float, str]]]:
    lines: list[tuple[float, str]] = []
    outcome = services._run(lambda line: lines.append((time.monotonic(), line)))
    return outcome, lines


def test_progress_is_shown_as_it_comes_and_success_is_kept(fake_setup):
    state = fake_setup('echo "step one" >&2; sleep 0.6; echo "step two"; '
                       'echo "{}" > "$OS_STATE_DIR/cpi-openstack.json"\n')
    outcome, lines = run()
    assert outcome.ok, outcome
    one = next(t for t, line in lines if line.endswith("step one"))
    two = next(t for t, line in lines if line.endswith("step two"))
    assert two - one >= 0.5, "the first line was shown before the script went on, not at its end"
    assert all(line.startswith("[openstack set-up ") for _, line in lines)
    assert (state / "cpi-openstack.json").exists()


def test_a_failure_keeps_the_exit_status_and_the_last_lines(fake_setup):
    fake_setup('echo "installing"; echo "E: no such package" >&2; exit 3\n')
    outcome, _ = run()
    assert not outcome.ok
    assert "failed (exit 3)" in outcome.reason and "E: no such package" in outcome.reason


def test_the_budget_is_its_own_and_stops_the_script(fake_setup, monkeypatch, tmp_path):
    marker = tmp_path / "still-running"
    fake_setup(f'echo "apt-get install ..."; sleep 30; touch "{marker}"\n')
    monkeypatch.setenv(services.TIMEOUT_ENV, "0.8")
    started = time.monotonic()
    outcome, _ = run()
    assert time.monotonic() - started < 15
    assert not outcome.ok and "did not finish within 1s" in outcome.reason and "apt-get install" in outcome.reason
    time.sleep(0.5)
    assert not marker.exists()


def test_quiet_spells_say_it_is_still_running(fake_setup, monkeypatch):
    fake_setup('sleep 0.8; echo "{}" > "$OS_STATE_DIR/cpi-openstack.json"\n')
    monkeypatch.setattr(progress, "QUIET", 0.3)
    outcome, lines = run()
    assert outcome.ok and any("still running" in line for _, line in lines)


def test_switched_off_or_not_root_says_why(monkeypatch):
    monkeypatch.setenv(services.SWITCH_ENV, "0")
    assert "CPI_TEST_OPENSTACK=0" in services.cannot_run_here()


class Item:
    def __init__(self, path, fixturenames=(), params=None):
        self.path = path
        self.fixturenames = list(fixturenames)
        if params is not None:
            self.callspec = type("CallSpec", (), {"params": params})()


@pytest.mark.parametrize("item, needed", [
    (Item("tests/openstack/test_openstack_cases.py", ["cloud", "cpi"]), True),
    (Item("tests/faults/test_storm_openstack.py", ["cloud"]), True),
    (Item("tests/lifecycle/test_lifecycle.py", ["target"], {"target": "openstack"}), True),
    (Item("tests/lifecycle/test_lifecycle.py", ["target"], {"target": "local"}), False),
    (Item("tests/openstack/test_openstack_units.py", ["tmp_path"]), False),
    (Item("tests/security/test_neighbour.py", ["world"]), False),
    (Item("tests/aws/test_aws_cases.py", ["cloud"]), False),
])
def test_only_tests_that_use_the_services_ask_for_them(item, needed):
    assert services.needs_services(item) is needed
