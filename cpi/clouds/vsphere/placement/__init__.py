"""Where a VM or a disk goes: the datacenter's clusters, resource pools and folders
(place.py, with datastore clusters in pods.py), the datastores and the draw among them
(datastores.py), the storage policies (pbm.py), create_vm's choice (choose.py, handed on as
chosen.Placement), the DRS rules and groups a VM joins (drs.py), and the check that no other
VM holds its IP addresses (ip_conflicts.py). Read-only but for the DRS rules and the folders
place.py makes."""
