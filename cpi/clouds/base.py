"""What a cloud is to this CPI: the BOSH interface (cpi.clouds.bosh.BoshCloud) plus what an
operator asks of it and BOSH never does — listing what the CPI made, one resource in
detail, what a cloud-config may name, checking a cloud-config online. All of it
read-only, and none of it on bin/cpi's path.

A plugin derives from `Cloud` (this module's name is its public import path); a cloud that
implements none of the operator's side still serves BOSH in full.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cpi.clouds.bosh import BoshCloud, DiskHint
from cpi.errors import NotImplemented as CpiNotImplemented

if TYPE_CHECKING:  # the operator's shapes: not on the start-up path of bin/cpi
    from cpi.clouds.inventory import Offer, Resource

__all__ = ["Cloud", "DiskHint"]


class Cloud(BoshCloud):
    # -- the operator's side (`cpi list|show|avail`): read-only, never called by BOSH
    def inventory(self, kind: str) -> list[Resource]:
        """Every resource of `kind` (vms, disks, stemcells, snapshots) this CPI made."""
        raise self._absent(f"listing {kind}")

    def show(self, kind: str, cid: str) -> Resource | None:
        """One resource, with its details; None when it is not there."""
        found = [r for r in self.inventory(kind) if r.cid == cid]
        return found[0] if found else None

    def available(self, offer: str) -> list[Offer]:
        """What a cloud-config may name: images, sizes, zones, networks."""
        raise self._absent(f"listing available {offer}")

    # -- the operator's side (`cpi validate --online`): read-only, never called by BOSH
    def check_cloud_config(self, items: list) -> list:
        """Check that what a cloud-config's cloud_properties name exists (subnets, security
        groups, flavors, ...), with read-only calls. `items` are cpi.clouds.findings.Item (kind,
        YAML path, cloud_properties); the answer is a list of cpi.clouds.findings.Finding.

        A cloud with checks overrides this (the built-in ones keep theirs in their
        `inspect` module); one without (a third-party plugin, say) raises NotImplemented,
        which `cpi validate` prints as such."""
        raise CpiNotImplemented(f"online checks are not implemented by the {self.name} cloud")
