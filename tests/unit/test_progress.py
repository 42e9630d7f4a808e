"""tests/support/progress.py: a set-up step's output shown as it comes, and a step past its
budget stopped with what it started (an apt-get left running holds dpkg's lock)."""

from __future__ import annotations

import os
import time

from tests.support import progress


def test_each_line_is_shown_as_it_comes_and_a_redrawn_line_as_it_ended():
    shown: list[str] = []
    done = progress.run(["sh", "-c", "echo one; printf 'x 5%%\\rx 100%%\\n'; echo two >&2; exit 3"],
                        budget=30, say=shown.append)
    assert shown == ["one", "x 100%", "two"]
    assert done.returncode == 3 and not done.ok
    assert done.tail == ("one", "x 100%", "two")


def test_a_step_past_its_budget_is_stopped_with_its_children():
    shown: list[str] = []
    started = time.monotonic()
    done = progress.run(["sh", "-c", "sleep 60 & echo $!; wait"], budget=1, say=shown.append)
    assert done.returncode is None and not done.ok
    assert time.monotonic() - started < 15
    child = int(shown[0])
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{child}"), "the step's child outlived it"
