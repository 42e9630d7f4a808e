"""The operator's wing: what the human `cpi` does beyond parsing its command line and
printing — certify a cloud account, check a cloud-config, read the cids a director knows,
find orphans, plan a call, query the audit trail, generate the reference.

It sits on top of the core, never under it. cpi/cli imports this package; this package
imports the core (config, the wire, the clouds' operator interface); nothing in the core
imports it. That is why the shapes the clouds themselves build for the operator — a
`Resource` or an `Offer` (cpi.clouds.inventory), a `Finding` or an `Item`
(cpi.clouds.findings) — live beside the cloud interface rather than here: a cloud that
imported them from here would point the arrow up. Nothing here parses arguments or draws
a table, so each piece can be tested, and reused by another command, without a terminal.
"""
