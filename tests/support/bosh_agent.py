"""What a bosh-agent of the official stemcells makes of the settings a CPI leaves it, and of
a persistent disk's hint: for the tests that hand this CPI's VMs to the official CPIs
(tests/aws/test_switching.py, tests/openstack/test_switching.py).

Read from cloudfoundry/bosh-agent (e94765a: settings/settings.go, infrastructure/
{http_metadata_service,config_drive_settings_source,metadata_service_interface}.go,
infrastructure/devicepathresolver/{virtio,id,mapped}_device_path_resolver.go,
platform/provider.go) and the stemcells' agent.json (cloudfoundry/bosh-linux-stemcell-builder,
stages/bosh_{aws,openstack}_agent_settings), not run:

- On AWS the agent reads EC2 user-data (http://169.254.169.254/latest/user-data); on
  OpenStack the config drive's `ec2/latest/user-data`, else the same path of the metadata
  service. Both hold the server's user_data. The document is JSON (or URL-safe base64 of
  it), decoded into the agent's settings struct plus `registry`, `server` and `dns`: Go's
  decoder fails the whole document when a field has the wrong JSON type, and the metadata
  service refuses settings without an agent_id.
- A disk's settings (ephemeral, or persistent from the attach_disk hint) are a string,
  taken as both the path and the volume id, or an object of string fields.
- Both stemcells resolve devices "virtio": first by the disk's cid under /dev/disk/by-id
  (on AWS rewritten `^vol-(.+)$` → `nvme-Amazon_Elastic_Block_Store_vol$1`, matched
  exactly; elsewhere any name ending in the cid), then by the path: /dev/sdX is looked for
  as /dev/sdX, /dev/vdX and /dev/xvdX; any other path as itself (a symlink followed).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

# ---------------------------------------------------------------- the agent's types

STR, BOOL, INT, UINT, ANY, MAP = "string", "bool", "int", "uint", "any", "map"


def _list(item: Any) -> tuple[str, Any]:
    return ("list", item)


_BLOBSTORE = {"provider": STR, "options": MAP}
_DISK_SETTINGS = {"id": STR, "deviceid": STR, "volumeid": STR, "lun": STR, "hostdeviceid": STR, "path": STR,
                  "iscsisettings": {"initiatorname": STR, "username": STR, "target": STR, "password": STR},
                  "filesystemtype": STR, "mountoptions": _list(STR), "partitioner": STR}
_BOSH_ENV = {
    "agent": {"settings": {"tmpfs": BOOL}}, "password": STR, "keep_root_password": BOOL,
    "remove_dev_tools": BOOL, "remove_static_libraries": BOOL, "authorized_keys": _list(STR), "swap_size": UINT,
    "mbus": {"cert": {"ca": STR, "private_key": STR, "certificate": STR}, "urls": _list(STR)},
    "ipv6": {"enable": BOOL}, "job_dir": {"tmpfs": BOOL, "tmpfs_size": STR}, "run_dir": {"tmpfs_size": STR},
    "blobstores": _list(_BLOBSTORE), "ntp": _list(STR), "parallel": INT,
}
_NETWORK = {"type": STR, "ip": STR, "netmask": STR, "gateway": STR, "prefix": STR, "resolved": BOOL,
            "use_dhcp": BOOL, "default": _list(STR), "dns": _list(STR), "mac": STR, "preconfigured": BOOL,
            "routes": _list({"destination": STR, "gateway": STR, "netmask": STR}), "alias": STR}
SETTINGS = {
    "agent_id": STR,
    "blobstore": _BLOBSTORE,
    "disks": {"system": STR, "ephemeral": ANY, "persistent": MAP, "raw_ephemeral": _list(_DISK_SETTINGS)},
    "env": {"bosh": _BOSH_ENV, "persistent_disk_fs": STR, "persistent_disk_mount_options": _list(STR),
            "persistent_disk_partitioner": STR},
    "networks": ("dict", _NETWORK),
    "ntp": _list(STR),
    "mbus": STR,
    "vm": {"name": STR},
}
#: What the metadata service and the config drive decode user-data into.
USER_DATA = {**SETTINGS, "registry": {"endpoint": STR}, "server": {"name": STR}, "dns": {"nameserver": _list(STR)}}


def type_errors(value: Any, kind: Any, where: str = "") -> list[str]:
    """Where Go's json.Unmarshal would refuse `value` for a field of type `kind` (null is
    every type's zero value; object keys match field names case-insensitively, unknown
    keys are ignored)."""
    if value is None or kind == ANY:
        return []
    here = where or "the document"
    if kind == STR:
        return [] if isinstance(value, str) else [f"{here}: {value!r} is not a JSON string"]
    if kind == BOOL:
        return [] if isinstance(value, bool) else [f"{here}: {value!r} is not true or false"]
    if kind in (INT, UINT):
        ok = isinstance(value, int) and not isinstance(value, bool) and (kind == INT or value >= 0)
        return [] if ok else [f"{here}: {value!r} is not an {'unsigned ' if kind == UINT else ''}integer"]
    if kind == MAP:
        return [] if isinstance(value, dict) else [f"{here}: {value!r} is not a JSON object"]
    if isinstance(kind, tuple) and kind[0] == "list":
        if not isinstance(value, list):
            return [f"{here}: {value!r} is not a JSON array"]
        return [e for i, item in enumerate(value) for e in type_errors(item, kind[1], f"{where}[{i}]")]
    if isinstance(kind, tuple) and kind[0] == "dict":
        if not isinstance(value, dict):
            return [f"{here}: {value!r} is not a JSON object"]
        return [e for key, item in value.items() for e in type_errors(item, kind[1], f"{where}.{key}")]
    assert isinstance(kind, dict), kind
    if not isinstance(value, dict):
        return [f"{here}: {value!r} is not a JSON object"]
    fields = {name.lower(): field for name, field in kind.items()}
    found = []
    for key, item in value.items():
        field = fields.get(key.lower())
        if field is not None:
            found += type_errors(item, field, f"{where}.{key}" if where else key)
    return found


def read_user_data(raw: bytes | str) -> dict[str, Any]:
    """The settings the agent gets from user-data (EC2's, or OpenStack's user_data through
    the metadata service or the config drive), or AssertionError saying why it would not
    boot with them."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    try:
        doc = json.loads(text)
    except ValueError:
        unquoted = text.replace('"', "")
        try:
            doc = json.loads(base64.urlsafe_b64decode(unquoted + "=" * (-len(unquoted) % 4)))
        except (ValueError, binascii.Error) as exc:
            raise AssertionError(f"the agent cannot decode the user-data: {exc}") from None
    problems = type_errors(doc, USER_DATA)
    assert not problems, "the agent's decoder refuses the user-data: " + "; ".join(problems)
    assert isinstance(doc, dict) and doc.get("agent_id"), \
        "the user-data has no agent_id: the agent takes it for a document without settings"
    return doc


# ---------------------------------------------------------------- disks


def disk_settings(disk_cid: str | None, hint: Any) -> dict[str, str]:
    """A disk's settings as the agent reads them from a hint (or `disks.ephemeral`)."""
    found = {"id": disk_cid or ""}
    if isinstance(hint, dict):
        problems = type_errors(hint, {"path": STR, "volume_id": STR, "id": STR, "lun": STR, "host_device_id": STR})
        assert not problems, f"the agent cannot read the disk hint {hint!r}: {'; '.join(problems)}"
        found.update({"path": hint.get("path") or "", "volume_id": hint.get("volume_id") or ""})
    elif isinstance(hint, str):
        found.update({"path": hint, "volume_id": hint})
    else:
        raise AssertionError(f"the agent reads no disk from the hint {hint!r} (neither a string nor an object)")
    return found


#: The stemcells' rewrite of a disk cid before it is looked for under /dev/disk/by-id.
AWS_DISK_ID = (r"^vol-(.+)$", r"nvme-Amazon_Elastic_Block_Store_vol\1")


def by_id_names(disk: dict[str, str], transform: tuple[str, str] | None) -> str | None:
    """The /dev/disk/by-id glob the agent tries first for a disk (None: too short an id,
    which it does not try)."""
    disk_id = disk["id"]
    if len(disk_id) < 20:
        return None
    if transform is None:
        return f"/dev/disk/by-id/*{disk_id}"
    pattern, replacement = transform
    return "/dev/disk/by-id/" + re.sub(pattern, replacement, disk_id)


def paths_tried(disk: dict[str, str]) -> list[str]:
    """The device paths the agent then looks at, from the disk's path."""
    path = disk["path"]
    if path.startswith("/dev/sd"):
        rest = path.removeprefix("/dev/sd")
        return [f"/dev/sd{rest}", f"/dev/vd{rest}", f"/dev/xvd{rest}"]
    return [path] if path else []
