"""VMs and their disks: create_vm's typed decisions (spec.py) and the clone (clone.py) and
what follows it (finish.py), the VMs as found (existing.py) and their life (vms.py), the
persistent disks (disks.py), the devices both read and change (devices.py, records.py) and
the agent's env ISO (iso.py)."""
