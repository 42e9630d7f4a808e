"""Session-wide: bin/cpi hands its calls to a warm helper by default (cpi.warm), which
outlives the calls for its idle time; the suite stops this checkout's helper when it ends,
so no process of the tests lingers after them."""

from __future__ import annotations

import pytest

from tests.support.runner import helper_action


@pytest.fixture(scope="session", autouse=True)
def _warm_helper_stopped_at_the_end():
    yield
    helper_action("stop")
