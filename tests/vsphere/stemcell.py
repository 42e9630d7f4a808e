"""A vSphere stemcell image for the tests: a tarball of `image.ovf` and `image-disk1.vmdk`,
shaped as a real vSphere stemcell's image (one SCSI LSI Logic controller with the system
disk, an IDE controller with a CD-ROM, one vmxnet3 NIC), with an empty streamOptimized vmdk
written here (a header, the descriptor, an empty grain directory, the footer and the
end-of-stream marker, as VMware's Virtual Disk Format 5.0 lays them out).
"""

from __future__ import annotations

import struct
import tarfile
from pathlib import Path

SECTOR = 512
GRAIN_SECTORS = 128
GTES_PER_GT = 512
CAPACITY_SECTORS = 2 * 1024 * 1024 * 2  # 2 GiB

_DESCRIPTOR = """# Disk DescriptorFile
version=1
CID=fffffffe
parentCID=ffffffff
createType="streamOptimized"

# Extent description
RW {sectors} SPARSE "image-disk1.vmdk"

# The Disk Data Base
#DDB

ddb.adapterType = "lsilogic"
ddb.virtualHWVersion = "4"
ddb.geometry.cylinders = "{cylinders}"
ddb.geometry.heads = "255"
ddb.geometry.sectors = "63"
"""


def _header(descriptor_sectors: int, gd_offset: int, overhead: int) -> bytes:
    flags = 1 | (1 << 16) | (1 << 17)  # newline check, compressed grains, markers
    head = struct.pack("<4sIIQQQQIQQQB4cH", b"KDMV", 3, flags, CAPACITY_SECTORS, GRAIN_SECTORS, 1,
                       descriptor_sectors, GTES_PER_GT, 0, gd_offset, overhead, 0, b"\n", b" ", b"\r", b"\n", 1)
    return head.ljust(SECTOR, b"\0")


def _marker(sectors: int, kind: int) -> bytes:
    return struct.pack("<QII", sectors, 0, kind).ljust(SECTOR, b"\0")


def vmdk() -> bytes:
    """An empty 2 GiB streamOptimized disk."""
    descriptor = _DESCRIPTOR.format(sectors=CAPACITY_SECTORS, cylinders=CAPACITY_SECTORS // (255 * 63)).encode()
    descriptor_sectors = -(-len(descriptor) // SECTOR)
    grain_tables = -(-CAPACITY_SECTORS // (GRAIN_SECTORS * GTES_PER_GT))
    gd_sectors = -(-grain_tables * 4 // SECTOR)
    overhead = 1 + descriptor_sectors
    gd_marker_at = overhead
    gd_offset = gd_marker_at + 1
    out = bytearray(_header(descriptor_sectors, 0xFFFFFFFFFFFFFFFF, overhead))
    out += descriptor.ljust(descriptor_sectors * SECTOR, b"\0")
    out += _marker(gd_sectors, 3)  # the grain directory: every grain table absent (zeros)
    out += bytes(gd_sectors * SECTOR)
    out += _marker(1, 2)  # the footer: the header again, with where the grain directory is
    out += _header(descriptor_sectors, gd_offset, overhead)
    out += _marker(0, 0)  # end of stream
    return bytes(out)


_OVF = """<?xml version="1.0" encoding="UTF-8"?>
<Envelope vmw:buildId="build-1" xmlns="http://schemas.dmtf.org/ovf/envelope/1"
    xmlns:cim="http://schemas.dmtf.org/wbem/wscim/1/common"
    xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1"
    xmlns:rasd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData"
    xmlns:vmw="http://www.vmware.com/schema/ovf"
    xmlns:vssd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_VirtualSystemSettingData"
    xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <References>
    <File ovf:href="image-disk1.vmdk" ovf:id="file1" ovf:size="{size}"/>
  </References>
  <DiskSection>
    <Info>Virtual disk information</Info>
    <Disk ovf:capacity="2" ovf:capacityAllocationUnits="byte * 2^30" ovf:diskId="vmdisk1" ovf:fileRef="file1"
        ovf:format="http://www.vmware.com/interfaces/specifications/vmdk.html#streamOptimized"/>
  </DiskSection>
  <NetworkSection>
    <Info>The list of logical networks</Info>
    <Network ovf:name="VM Network"><Description>The VM Network network</Description></Network>
  </NetworkSection>
  <VirtualSystem ovf:id="vm">
    <Info>A virtual machine</Info>
    <Name>vm</Name>
    <OperatingSystemSection ovf:id="94" vmw:osType="ubuntu64Guest">
      <Info>The kind of installed guest operating system</Info>
    </OperatingSystemSection>
    <VirtualHardwareSection>
      <Info>Virtual hardware requirements</Info>
      <System>
        <vssd:ElementName>Virtual Hardware Family</vssd:ElementName>
        <vssd:InstanceID>0</vssd:InstanceID>
        <vssd:VirtualSystemIdentifier>vm</vssd:VirtualSystemIdentifier>
        <vssd:VirtualSystemType>vmx-13</vssd:VirtualSystemType>
      </System>
      <Item>
        <rasd:AllocationUnits>hertz * 10^6</rasd:AllocationUnits>
        <rasd:ElementName>1 virtual CPU(s)</rasd:ElementName>
        <rasd:InstanceID>1</rasd:InstanceID>
        <rasd:ResourceType>3</rasd:ResourceType>
        <rasd:VirtualQuantity>1</rasd:VirtualQuantity>
      </Item>
      <Item>
        <rasd:AllocationUnits>byte * 2^20</rasd:AllocationUnits>
        <rasd:ElementName>512MB of memory</rasd:ElementName>
        <rasd:InstanceID>2</rasd:InstanceID>
        <rasd:ResourceType>4</rasd:ResourceType>
        <rasd:VirtualQuantity>512</rasd:VirtualQuantity>
      </Item>
      <Item>
        <rasd:Address>0</rasd:Address>
        <rasd:ElementName>SCSI Controller 0</rasd:ElementName>
        <rasd:InstanceID>3</rasd:InstanceID>
        <rasd:ResourceSubType>lsilogic</rasd:ResourceSubType>
        <rasd:ResourceType>6</rasd:ResourceType>
      </Item>
      <Item>
        <rasd:Address>0</rasd:Address>
        <rasd:ElementName>IDE Controller 0</rasd:ElementName>
        <rasd:InstanceID>4</rasd:InstanceID>
        <rasd:ResourceType>5</rasd:ResourceType>
      </Item>
      <Item ovf:required="false">
        <rasd:AddressOnParent>0</rasd:AddressOnParent>
        <rasd:AutomaticAllocation>false</rasd:AutomaticAllocation>
        <rasd:ElementName>CD-ROM 1</rasd:ElementName>
        <rasd:InstanceID>5</rasd:InstanceID>
        <rasd:Parent>4</rasd:Parent>
        <rasd:ResourceType>15</rasd:ResourceType>
      </Item>
      <Item>
        <rasd:AddressOnParent>0</rasd:AddressOnParent>
        <rasd:ElementName>Hard Disk 1</rasd:ElementName>
        <rasd:HostResource>ovf:/disk/vmdisk1</rasd:HostResource>
        <rasd:InstanceID>6</rasd:InstanceID>
        <rasd:Parent>3</rasd:Parent>
        <rasd:ResourceType>17</rasd:ResourceType>
      </Item>
      <Item>
        <rasd:AddressOnParent>7</rasd:AddressOnParent>
        <rasd:AutomaticAllocation>true</rasd:AutomaticAllocation>
        <rasd:Connection>VM Network</rasd:Connection>
        <rasd:ElementName>Network adapter 1</rasd:ElementName>
        <rasd:InstanceID>7</rasd:InstanceID>
        <rasd:ResourceSubType>VmxNet3</rasd:ResourceSubType>
        <rasd:ResourceType>10</rasd:ResourceType>
      </Item>
    </VirtualHardwareSection>
  </VirtualSystem>
</Envelope>
"""


def build(directory: Path) -> Path:
    """The stemcell's `image` (what the director hands create_stemcell) in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    disk = vmdk()
    (directory / "image-disk1.vmdk").write_bytes(disk)
    (directory / "image.ovf").write_text(_OVF.format(size=len(disk)))
    image = directory / "image"
    with tarfile.open(image, "w:gz") as archive:
        for name in ("image.ovf", "image-disk1.vmdk"):
            archive.add(directory / name, arcname=name)
    return image
