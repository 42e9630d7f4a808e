"""The openstack cloud plugin. Importing it loads neither openstacksdk nor keystoneauth1
(see cloud.py and session.py): `info` stays light."""

from .cloud import OpenStackCloud

__all__ = ["OpenStackCloud"]
