"""The cloud registry: built-in clouds by module path, third-party ones by entry point.

A cloud module is imported only when its plugin is selected, and a cloud module must not
import its SDK at module level, so `info` never pays for boto3 or openstacksdk.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from cpi.errors import CpiError

if TYPE_CHECKING:
    from cpi.clouds.base import Cloud

ENTRY_POINT_GROUP = "bosh_cpi.clouds"

BUILTIN = {
    "local": "cpi.clouds.local:LocalCloud",
    "aws": "cpi.clouds.aws:AwsCloud",
    "openstack": "cpi.clouds.openstack:OpenStackCloud",
}


def _import(target: str):
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def _entry_points() -> dict:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available() -> list[str]:
    return sorted(set(BUILTIN) | set(_entry_points()))


def load_cloud(name: str) -> type["Cloud"]:
    """The Cloud class registered as `name`, with a clear error when it is not there."""
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
