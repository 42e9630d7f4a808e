"""The vsphere cloud (#25), in the making: its configuration and cloud_properties models
(props.py, under the official vSphere CPI's names), the vCenter session (session.py: bounded,
retried, re-established requests), the lookups by name (lookups.py) and the translation of
vCenter failures (errors.py). The cloud class comes next; until it does, `vsphere` is not in
cpi/clouds/__init__.py's registry, so no config can select a cloud that would fail every
call."""
