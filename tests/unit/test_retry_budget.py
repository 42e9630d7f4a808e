"""cpi/retry.py counts the first attempt against the budget: a request that hangs until its
read timeout has spent that time already (tenacity's clock starts after it, since the first
attempt runs bare). Without this, a hung endpoint took two read timeouts, not one: `cpi
--timeout 5` ended after 10 s, and the director's 600 s budget was 600 s plus a read."""

from __future__ import annotations

import logging
import re
import time

import pytest

from cpi import retry


def test_a_first_attempt_that_outlasts_the_budget_is_not_repeated(caplog):
    attempts = []

    def hangs_then_times_out():
        attempts.append(time.monotonic())
        time.sleep(0.6)  # a read timeout longer than the whole budget
        raise TimeoutError("read timed out")

    with caplog.at_level(logging.INFO, logger="cpi.retry"), pytest.raises(TimeoutError):
        retry.call(hangs_then_times_out, classify=lambda exc: retry.Verdict(retry.Kind.TRANSIENT, "ReadTimeout"),
                   what="ec2:DescribeInstances", budget=0.5, sleep=lambda seconds: None)
    assert len(attempts) == 1
    gave_up = [r.getMessage() for r in caplog.records if "giving up" in r.getMessage()]
    assert len(gave_up) == 1, gave_up
    assert float(re.search(r"giving up after ([\d.]+)s", gave_up[0]).group(1)) >= 0.6, gave_up  # as it was spent
