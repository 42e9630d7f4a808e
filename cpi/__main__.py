"""`python -m cpi [CONFIG_PATH]`: serve one CPI request from stdin."""

from cpi.entry import run

run()
