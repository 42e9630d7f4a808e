"""A peer that answers, but never enough, fails the call within its bounds (#33): a vCenter
or an NSX-T manager trickling its answer a byte a second once held a call for ever (each
read waited its read_timeout, and a byte came every second), and `cpi list vms --timeout 5`
with it; a vCenter's 300 MiB answer was read whole (650 MiB of memory). Now read_timeout
bounds each whole request and an answer is read up to cpi/bounded.py's cap,
and either failure is a CloudError naming the peer and the bound, not retried.

The stand-ins are tests/faults/trickle.py's; the calls are real bin/cpi processes."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from cpi.bounded import ANSWER_CAP
from tests.faults import test_unreachable as unreachable
from tests.faults.trickle import Peer, bomb, huge, trickle
from tests.operator.test_cli_timeout import run
from tests.support.runner import BIN_CPI, COLD_ENV, Cpi

READ_TIMEOUT = 3


@pytest.fixture(scope="module")
def trickling():
    peer = Peer(trickle, tls=True)
    yield peer
    peer.close()


def test_a_trickling_nsxt_manager_fails_the_call_within_read_timeout(trickling, tmp_path):
    config = unreachable.vsphere(tmp_path / "cpi.json", trickling.address, read_timeout=READ_TIMEOUT,
                                 nsxt={"host": trickling.address, "username": "admin", "password": unreachable.SECRET})
    error, took, _ = peak(config, unreachable.CREATE_NETWORK)
    assert took < READ_TIMEOUT + unreachable.SLACK, took
    assert f"the NSX-T manager at {trickling.address} did not complete its answer within read_timeout" \
        in error["message"], error


@pytest.mark.parametrize("cloud", ["vsphere", "aws"])
def test_cpi_list_vms_with_timeout_5_ends_in_5_s_against_a_trickling_peer(cloud, tmp_path):
    """read_timeout at its default (120 s, 60 s): --timeout lowers it, for the whole request."""
    peer = Peer(trickle, tls=cloud == "vsphere")
    if cloud == "vsphere":
        config, named = unreachable.vsphere(tmp_path / "cpi.json", peer.address), f"the vCenter at {peer.address}"
    else:
        config, named = unreachable.aws(tmp_path / "cpi.json", peer.url), peer.url
    try:
        proc, took = run("list", "vms", "--config", str(config), "--timeout", "5")
    finally:
        peer.close()
    assert 4.5 <= took < 5 + unreachable.SLACK, (took, proc.stderr)
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    assert f"{named} did not complete its answer within read_timeout (5s)" in proc.stderr, proc.stderr
    assert unreachable.SECRET not in proc.stderr


#: runs bin/cpi (argv) with stdin and prints its peak RSS in KiB: the only child of a fresh
#: parent, so RUSAGE_CHILDREN is bin/cpi's alone
PEAK = ("import resource, subprocess, sys\n"
        "proc = subprocess.run(sys.argv[1:], input=sys.stdin.buffer.read(), capture_output=True)\n"
        "sys.stdout.write(proc.stdout.decode() + '\\n' + str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))")


#: (a config naming the stand-in `peer`, and how the error names the peer) of each cloud
CLOUDS = {
    "vsphere": (lambda path, peer: unreachable.vsphere(path, peer.address, read_timeout=READ_TIMEOUT),
                lambda peer: f"the vCenter at {peer.address}"),
    "aws": (lambda path, peer: unreachable.aws(path, peer.url, read_timeout=READ_TIMEOUT,
                                               retry_budget_seconds=unreachable.BUDGET), lambda peer: peer.url),
    "openstack": (lambda path, peer: unreachable.openstack(path, f"{peer.url}/v3", read_timeout=READ_TIMEOUT),
                  lambda peer: f"{peer.url}/v3"),
}


def peak(config, call: tuple = unreachable.HAS_VM) -> tuple[dict, float, float]:
    """The error of `call` through bin/cpi (a cold process), the seconds it took and its peak
    RSS in MiB; a call still running after 30 s fails the test (as every one did before)."""
    request = json.dumps(Cpi(config).request(*call)).encode()
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", PEAK, str(BIN_CPI), str(config)], input=request,
                          capture_output=True, env=dict(COLD_ENV), timeout=30)
    took = time.monotonic() - started
    out, _, rss = proc.stdout.decode().rpartition("\n")
    error = json.loads(out)["error"]
    assert error["type"] == "Bosh::Clouds::CloudError" and error["ok_to_retry"] is False, error
    assert unreachable.SECRET not in out
    return error, took, int(rss) / 1024


def answered(cloud: str, serve, tmp_path):
    """bin/cpi's error, time taken and peak RSS against `cloud`'s stand-in answering by
    `serve`, which it asked once only (no retry of a bounded answer), and how it names it."""
    config, named = CLOUDS[cloud]
    peer = Peer(serve, tls=cloud == "vsphere")
    try:
        error, took, rss = peak(config(tmp_path / "cpi.json", peer))
    finally:
        peer.close()
    assert peer.requests == 1  # not asked again
    return error, took, rss, lambda: named(peer)


@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_a_trickling_endpoint_fails_the_call_within_read_timeout(cloud, tmp_path):
    """The vCenter's first request (GET /sdk/vimServiceVersions.xml), botocore's and
    keystoneauth's too (urllib3 bounded each read only)."""
    error, took, _, named = answered(cloud, trickle, tmp_path)
    assert READ_TIMEOUT * 0.9 <= took < READ_TIMEOUT + unreachable.SLACK, took
    assert (f"{named()} did not complete its answer within read_timeout ({READ_TIMEOUT}s), which bounds each "
            "whole request") in error["message"], error


@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_a_300_mib_answer_fails_at_the_cap_without_reading_it(cloud, tmp_path):
    """The answer is streamed as fast as bin/cpi reads it; its peak RSS stays far below."""
    error, took, rss, named = answered(cloud, huge, tmp_path)
    assert (f"the answer of {named()} is too large: more than the {ANSWER_CAP >> 20} MiB this CPI reads of "
            "one answer") in error["message"], error
    print(f"{cloud}: a 300 MiB answer failed in {took:.1f}s, bin/cpi's peak RSS {rss:.0f} MiB")
    assert rss < (ANSWER_CAP >> 20) + 160, rss


def test_a_gzip_bomb_fails_at_the_cap_as_it_is_decoded(tmp_path):
    """requests asks for gzip and urllib3 decodes it: a 1 MiB answer was 1 GiB (2.1 GiB of
    memory) from a Keystone. (botocore decodes nothing; pyVmomi's SOAP answers stream into
    its parser.)"""
    config, named = CLOUDS["openstack"]
    peer = Peer(bomb)
    try:
        error, _, rss = peak(config(tmp_path / "cpi.json", peer))
    finally:
        peer.close()
    assert f"the answer of {named(peer)} is too large: more than the {ANSWER_CAP >> 20} MiB" in error["message"]
    assert rss < (ANSWER_CAP >> 20) + 160, rss
