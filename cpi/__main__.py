"""`python -m cpi [CONFIG_PATH]`: serve one CPI request from stdin."""

from cpi.rpc import run

run()
