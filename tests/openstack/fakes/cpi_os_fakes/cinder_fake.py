"""Cinder backend: cinder's own in-tree fake (logs calls, stores nothing), made complete.

The stock FakeLoggingVolumeDriver inherits two data-path methods from the LVM driver that
need a real volume group: extend_volume (the volume ends in 'error_extending') and
copy_image_to_volume (a volume from an image, hence nova's boot-from-volume, ends in
'error'). Here both only succeed; no bytes are copied anywhere.
"""
from cinder.tests import fake_driver


class ExtendableFakeVolumeDriver(fake_driver.FakeLoggingVolumeDriver):

    def extend_volume(self, volume, new_size):
        return None

    def copy_image_to_volume(self, context, volume, image_service, image_id, *args, **kwargs):
        return None
