"""The vCenter as the vsphere cloud talks to it: one login (session.py) whose every SOAP
request, datastore transfer (transfer.py) and NSX manager's REST request (rest.py) goes
through the call's channel (cpi.channel): withheld under `cpi plan` (planned.py, made_up.py),
retried, and written to the audit trail (audited.py); and the vCenter's tasks, waited for
(tasks.py). The rest of the wing asks through these and never sends a request itself."""
