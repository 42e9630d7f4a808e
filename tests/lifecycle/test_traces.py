"""The traces of a lifecycle on every cloud (tests/lifecycle/debug_run.py: traces on,
received over OTLP/HTTP by tests/support/otlp.py): one trace per call, its span saying what
the call was and how it ended, and beneath it a span for each IaaS request (with its
attempts) and each wait, all inside the call's time."""

from __future__ import annotations

import os

from tests.support.otlp import tree

#: STATUS_CODE_ERROR in OTLP's Status
ERROR = 2


def _trees(run) -> list[tuple[dict, list[dict]]]:
    """(root, descendants) per trace, in the order of the calls."""
    trees = []
    for spans in run.collector.traces().values():
        (root,) = [s for s in spans if s["parent_id"] is None]
        trees.append((root, [s for s in spans if s is not root]))
    return sorted(trees, key=lambda tree: tree[0]["start_ns"])


def test_each_call_is_one_trace_naming_the_call(debug_lifecycle, target):
    run = debug_lifecycle
    trees = _trees(run)
    assert [root["attributes"]["bosh.method"] for root, _ in trees] == [method for method, _ in run.calls]
    for (root, _), (method, response) in zip(trees, run.calls, strict=True):
        attributes = root["attributes"]
        assert root["name"] == f"cpi {method}"
        assert attributes["cloud.provider"] == target.name
        assert attributes["bosh.request_id"] and attributes["bosh.director_uuid"] == "director-uuid-1"
        if response.error is None:
            assert root["status"] != ERROR
            assert "error.type" not in attributes
        else:
            assert root["status"] == ERROR
            assert attributes["error.type"] == response.error["type"]
            assert attributes["bosh.ok_to_retry"] is response.error["ok_to_retry"]
    by_method = {root["attributes"]["bosh.method"]: root for root, _ in reversed(trees)}  # the first of each
    assert by_method["create_vm"]["attributes"]["bosh.result.cid"] == run.cids["vm_cid"]
    assert by_method["create_disk"]["attributes"]["bosh.result.cid"] == run.cids["disk_cid"]
    assert by_method["attach_disk"]["attributes"]["bosh.vm_cid"] == run.cids["vm_cid"]
    assert by_method["attach_disk"]["attributes"]["bosh.disk_cid"] == run.cids["disk_cid"]
    assert {r["path"] for r in run.collector.requests} == {"/v1/traces"}


def test_iaas_requests_and_waits_are_spans_of_their_call(debug_lifecycle, target):
    run = debug_lifecycle
    for root, spans in _trees(run):
        ids = {root["span_id"]} | {s["span_id"] for s in spans}
        for span in spans:
            assert span["parent_id"] in ids, span["name"]  # a tree, nothing dangling
            assert root["start_ns"] <= span["start_ns"] <= span["end_ns"] <= root["end_ns"], span["name"]
            if "cpi.request" in span["attributes"]:
                assert span["attributes"]["cpi.attempts"] >= 1
    if target.name == "local":
        return  # the local cloud makes no IaaS request
    root, spans = next(tree for tree in _trees(run) if tree[0]["attributes"]["bosh.method"] == "create_vm")
    requests = [s for s in spans if "cpi.request" in s["attributes"]]
    assert requests, tree([root, *spans])
    sent = [s for s in requests if "cpi.service" in s["attributes"]]  # (an outer retry names no service)
    assert sent and all(s["attributes"]["cpi.operation"] for s in sent), tree([root, *spans])
    if target.name in ("aws", "openstack"):  # (vSphere's session names its vCenter in its errors only, and
        # pyVmomi's answers carry no HTTP status)
        assert any(s["attributes"].get("http.response.status_code") == 200 for s in sent), tree([root, *spans])
        assert any(s["attributes"].get("server.address") for s in requests)  # (an outer retry names none)
        # they wait for the VM to run through cpi.waits
        waits = [s for s in spans if s["name"].startswith("wait for ")]
        assert waits and all(s["attributes"]["cpi.looks"] >= 1 for s in waits), tree([root, *spans])
        looks = [s for s in requests if any(s["parent_id"] == w["span_id"] for w in waits)]
        assert looks, f"a wait's looks are requests beneath it:\n{tree([root, *spans])}"
    if os.environ.get("CPI_TRACE_SHOW"):  # to read one by hand: CPI_TRACE_SHOW=1 bin/test ... -s
        print(f"\n{target.name} create_vm\n{tree([root, *spans])}")
