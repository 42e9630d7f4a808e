"""The lifecycle target fixture: every scenario runs once per cloud.

A cloud's target module provides `make(tmp_path_factory) -> Target` and may call
pytest.skip() with the reason it cannot run here (no moto, no OpenStack services, ...).
"""

from __future__ import annotations

import importlib

import pytest

from tests.openstack.services import pytest_collection_finish  # noqa: F401  (set-up before the first test)

TARGETS = {
    "local": "tests.lifecycle.local_target",
    "aws": "tests.aws.target",
    "aws-real": "tests.aws.real_target",
    "openstack": "tests.openstack.target",
    "vsphere": "tests.vsphere.target",
}


@pytest.fixture(scope="session", params=sorted(TARGETS))
def target(request, tmp_path_factory):
    try:
        module = importlib.import_module(TARGETS[request.param])
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("tests."):
            pytest.skip(f"the {request.param} cloud has no lifecycle target yet")
        raise
    made = module.make(tmp_path_factory)
    yield made
    made.cleanup()


@pytest.fixture(scope="session")
def debug_lifecycle(target, tmp_path_factory):
    """One debug-level lifecycle with secrets planted and traces on, per cloud
    (tests/lifecycle/debug_run.py), for the secret scan and the trace checks."""
    from tests.lifecycle import debug_run
    from tests.support.otlp import Collector

    collector = Collector()
    try:
        yield debug_run.run(target, tmp_path_factory.mktemp(f"debug-{target.name}"), collector)
    finally:
        collector.close()
