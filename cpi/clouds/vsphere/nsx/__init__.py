"""NSX, the network virtualisation VMs join once they are on: NSX-T (nsxt/: its Manager and
Policy APIs, and the managed networks create_network makes) and NSX-V (nsxv.py, past its end
of support, its keys kept). Each loads only when cpi.json or a vm_type names it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..job_config import VsphereProperties


def nsxt_refusal(properties: VsphereProperties) -> str | None:
    """Why a vm_type's `nsxt` cannot be carried out (None: it can), before anything is made:
    here, so that create_vm and `cpi validate` ask it without loading NSX-T's clients."""
    if properties.nsxt is None:
        return ("vm_type cloud_properties 'nsxt' needs the NSX-T manager, which cpi.json does not name (`nsxt`, the "
                "job's vcenter.nsxt.*)")
    return None
