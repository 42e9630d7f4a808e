"""The cloud registry: built-in clouds by module path, third-party ones by entry point.

A cloud module is imported only when its plugin is selected, and a cloud module must not
import its SDK at module level, so `info` never pays for boto3 or openstacksdk.
"""

from __future__ import annotations

import os

from cpi.errors import CpiError

TYPE_CHECKING = False  # not `typing`: `info` imports this module, and typing costs ms
if TYPE_CHECKING:
    from cpi.clouds.base import Cloud

ENTRY_POINT_GROUP = "bosh_cpi.clouds"

BUILTIN = {
    "local": "cpi.clouds.local:LocalCloud",
    "aws": "cpi.clouds.aws:AwsCloud",
    "openstack": "cpi.clouds.openstack:OpenStackCloud",
    "vsphere": "cpi.clouds.vsphere:VsphereCloud",
}

#: What `info` reports for each built-in cloud (its class's `stemcell_formats`), here so
#: that `info` need not import the cloud, nor pydantic with it.
STEMCELL_FORMATS = {
    "local": ["dummy", "local-raw", "local-light"],
    "aws": ["aws-raw", "aws-light"],
    "openstack": ["openstack-raw", "openstack-qcow2", "openstack-light"],
    "vsphere": ["vsphere-ovf", "vsphere-ova"],
}


def builtin_stemcell_formats(name: str) -> list[str] | None:
    """The stemcell formats of built-in cloud `name` if it is in this build, else None."""
    formats = STEMCELL_FORMATS.get(name)
    if formats is None or not os.path.isfile(os.path.join(os.path.dirname(__file__), name, "__init__.py")):
        return None
    return formats


def _import(target: str) -> object:
    import importlib

    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def _entry_points() -> dict:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available() -> list[str]:
    return sorted(set(BUILTIN) | set(_entry_points()))


#: The clouds this process has loaded, in order: a cold call that starts the warm helper
#: names them, so the helper preloads their SDKs (Cloud.preload) for the calls after it.
LOADED: list[str] = []


def load_cloud(name: str) -> type[Cloud]:
    """The Cloud class registered as `name`, with a clear error when it is not there or is
    not a `cpi.clouds.base.Cloud` (a plugin's class that is not one would otherwise fail
    later, on the first hook the CPI asks of it, with an AttributeError)."""
    from cpi.clouds.base import Cloud

    cloud = _load(name)
    if not (isinstance(cloud, type) and issubclass(cloud, Cloud)):
        raise CpiError(f"cloud plugin '{name}' is {cloud!r}, which is not a subclass of cpi.clouds.base.Cloud")
    if name not in LOADED:
        LOADED.append(name)
    return cloud


def _load(name: str) -> object:
    if name in BUILTIN:
        try:
            return _import(BUILTIN[name])
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("cpi.clouds."):
                raise CpiError(f"cloud plugin '{name}' is not available in this build") from None
            raise
    entry = _entry_points().get(name)
    if entry is None:
        raise CpiError(
            f"unknown cloud plugin '{name}'; available: {', '.join(available())} "
            f"(third-party clouds register in the '{ENTRY_POINT_GROUP}' entry-point group)"
        )
    return entry.load()
