"""Stemcells: create_stemcell, delete_stemcell.

A heavy stemcell's image is copied into the state dir (`stemcells/<cid>/image`, 0600: it
may be secret whatever its source's mode) with its sha1, so that the director may remove
its own copy; a light stemcell (no image path) is a record only. Its VMs do not use the
image: a local VM is a process.
"""

from __future__ import annotations

from cpi.cids import StemcellCid

from . import cleanup, fileops
from .session import Session, then_collect_stale_locks
from .store import StemcellRecord


class Stemcells:
    def __init__(self, session: Session):
        self.session = session
        self.store = session.store
        self.log = session.log

    def create(self, image_path: str, cloud_properties: dict, tags: dict[str, str]) -> str:
        session = self.session
        stemcell_cid = StemcellCid(self.store.new_cid(StemcellRecord))
        record = StemcellRecord(
            stemcell_cid=stemcell_cid, cloud_properties=cloud_properties, tags={k: str(v) for k, v in tags.items()},
            director_uuid=session.context.director_uuid,
        )
        source = fileops.open_image(image_path) if image_path else None
        try:
            with cleanup.creating(session, stemcell_cid):
                directory = self.store.make_dir(StemcellRecord, stemcell_cid)
                if source is not None:
                    record.image = "image"
                    record.sha1, record.size = fileops.copy_with_sha1(
                        source, directory / "image" if session.effect("copy the stemcell image") else None)
                    self.log.info("copied stemcell image %s (%d bytes, sha1 %s)", image_path, record.size, record.sha1)
                else:
                    self.log.info("light stemcell: no image to copy")
                self.store.save(record)
        finally:
            if source is not None:
                source.close()
        session.audit("create", "stemcell", stemcell_cid,
                      new={"light": source is None, "sha1": record.sha1, "size": record.size, "tags": record.tags})
        return stemcell_cid

    @then_collect_stale_locks
    def delete(self, stemcell_cid: StemcellCid) -> None:
        cleanup.delete_alone(self.session, stemcell_cid, StemcellRecord, "stemcell")
