"""The fake bottom layer of the loopback OpenStack used by the CPI's tests.

Loaded by the service processes from $OS_STATE_DIR/py (setup.sh copies this folder there).
"""
