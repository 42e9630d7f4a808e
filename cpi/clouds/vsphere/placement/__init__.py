"""Where a VM or a disk goes: the datacenter's clusters, resource pools and datastores
(place.py, with datastore clusters in pods.py), the storage policies (pbm.py), the DRS rules
and groups a VM joins (drs.py), and the check that no other VM holds its IP addresses
(ip_conflicts.py). Read-only but for the DRS rules and the folders place.py makes."""
