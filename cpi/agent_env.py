"""The settings a bosh-agent reads at boot, built one way for every cloud.

Registry-less (CPI API v2) settings: the CPI hands the agent everything in user-data, a
config drive or (local cloud) a file, and persistent disks reach a running agent through
the director's `add_persistent_disk` with the attach_disk hint.
"""

from __future__ import annotations

import copy
from typing import Any

from cpi.cids import AgentId
from cpi.models import AgentConfig, Network, dns_servers


def settings(
    *,
    agent_id: AgentId,
    vm_name: str,
    agent: AgentConfig,
    networks: dict[str, Network],
    env: dict[str, Any] | None,
    system_disk: str = "/dev/sda",
    ephemeral_disk: str | dict[str, Any] | None = "/dev/sdb",
    persistent_disks: dict[str, Any] | None = None,
    raw_ephemeral: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The agent's `settings.json` document.

    `persistent` is always an object (a list makes the agent refuse to start) and `env` is
    passed through verbatim: it carries the agent's mbus certificate and the director's
    bosh.* defaults, which the CPI must not reinterpret.
    """
    disks: dict[str, Any] = {
        "system": system_disk,
        "ephemeral": ephemeral_disk,
        "persistent": dict(persistent_disks or {}),
    }
    if raw_ephemeral:
        disks["raw_ephemeral"] = raw_ephemeral
    doc: dict[str, Any] = {
        "agent_id": agent_id,
        "vm": {"name": vm_name},
        "ntp": list(agent.ntp),
        "blobstore": copy.deepcopy(agent.blobstore),
        "networks": {name: net.wire() for name, net in networks.items()},
        "disks": disks,
        "env": copy.deepcopy(env or {}),
    }
    if agent.mbus:
        doc["mbus"] = agent.mbus
    return doc


def user_data(settings_doc: dict[str, Any], networks: dict[str, Network], server_name: str | None = None) -> dict:
    """The user-data document for clouds that boot the agent from metadata: the settings
    plus the `dns`/`networks` (and OpenStack's `server.name`) the agent reads before it has
    any settings."""
    doc = dict(settings_doc)
    doc["dns"] = {"nameserver": dns_servers(networks)}
    if server_name:
        doc["server"] = {"name": server_name}
    return doc
