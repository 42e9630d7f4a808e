"""The fixtures the local cloud's tests share: a local cloud of its own per test, in
tmp_path (its VMs' processes killed at the end), and a stemcell in it."""

from __future__ import annotations

import pytest

from tests.lifecycle.local_target import LocalTarget


@pytest.fixture
def local(tmp_path):
    target = LocalTarget(tmp_path)
    yield target
    target.cleanup()


@pytest.fixture
def stemcell(local):
    return local.cpi("create_stemcell", *local.stemcell_args())
