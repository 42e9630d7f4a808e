"""The vsphere cloud plugin (a vCenter through pyVmomi). Importing it loads no pyVmomi (see
cloud.py and vcenter/session.py): `info` stays light."""

from .cloud import VsphereCloud

__all__ = ["VsphereCloud"]
