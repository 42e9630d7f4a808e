"""The BOSH interface is typed as BOSH names its identifiers, and apart from the operator's.

Static types only help if every cid parameter carries its own type: a `str` left anywhere
lets a VM's cid pass where a disk's belongs without a word from mypy (bin/test runs it).
"""

from __future__ import annotations

import inspect
import typing

import pytest

from cpi import api, cids
from cpi.clouds.base import Cloud
from cpi.clouds.bosh import BoshCloud

TYPES = {"vm_cid": cids.VmCid, "disk_cid": cids.DiskCid, "stemcell_cid": cids.StemcellCid,
         "snapshot_cid": cids.SnapshotCid, "network_cid": cids.NetworkCid, "agent_id": cids.AgentId}
OPERATOR_METHODS = {"inventory", "show", "available", "check_cloud_config"}


def bosh_methods():
    return [name for name, member in vars(BoshCloud).items() if inspect.isfunction(member) and not name.startswith("_")
            and name not in ("preload", "before_call")]


def cid_type(annotation):
    """VmCid for VmCid, VmCid | None, list[VmCid] or Annotated[VmCid, ...]."""
    for arg in (typing.get_args(annotation) or (annotation,)):
        if arg in TYPES.values():
            return arg
        if typing.get_args(arg):
            return cid_type(arg)
    return annotation


@pytest.mark.parametrize("name", bosh_methods())
def test_every_cid_of_the_bosh_interface_has_its_own_type(name):
    hints = typing.get_type_hints(getattr(BoshCloud, name))
    for param, annotation in hints.items():
        kind = param.removesuffix("s") if param == "disk_cids" else param
        if kind in TYPES:
            assert cid_type(annotation) is TYPES[kind], f"BoshCloud.{name}({param}: {annotation})"


@pytest.mark.parametrize("name", sorted(api.METHODS))
def test_the_wire_hands_the_cloud_typed_cids(name):
    hints = typing.get_type_hints(api.METHODS[name], include_extras=True)
    for param, annotation in hints.items():
        kind = param.removesuffix("s") if param == "disk_cids" else param
        if kind in TYPES and annotation is not typing.Any:  # configure_networks takes anything, to refuse it
            assert cid_type(annotation) is TYPES[kind], f"api.{name}({param}: {annotation})"


def test_the_operator_methods_are_not_part_of_the_bosh_interface():
    assert not OPERATOR_METHODS & set(dir(BoshCloud))
    assert set(dir(Cloud)) >= OPERATOR_METHODS and issubclass(Cloud, BoshCloud)
    assert typing.get_type_hints(api.Call.cloud.fget)["return"] is BoshCloud  # all the wire relies on
