"""The local cloud's built-in VM process: a stand-in for bosh-agent.

Started exactly as a real bosh-agent would be (`-b BASE -P dummy -M dummy -C agent.json`),
it reads the settings the CPI wrote, records each boot in BASE/boots.jsonl (with what it
sees in BASE/store, where a job keeps its persistent data), listens on the
mbus port when the mbus is HTTPS (so one VM per port holds, as with the real agent), and
runs until SIGTERM. Standard library only: it runs as a script, outside the CPI's venv path.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time
from urllib.parse import urlsplit


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="local-agent")
    parser.add_argument("-b", dest="base", required=True)
    parser.add_argument("-P", dest="platform", default="dummy")
    parser.add_argument("-M", dest="mbus_handler", default="dummy")
    parser.add_argument("-C", dest="config", required=True)
    args = parser.parse_args(argv)

    with open(args.config) as handle:
        sources = json.load(handle)["Infrastructure"]["Settings"]["Sources"]
    settings_path = next(s["SettingsPath"] for s in sources if s.get("Type") == "File")
    with open(settings_path) as handle:
        settings = json.load(handle)
    if not settings.get("agent_id"):
        print("ERROR - settings have no agent_id", file=sys.stderr, flush=True)
        return 1

    listener = None
    mbus = urlsplit(settings.get("mbus") or "")
    if mbus.scheme == "https" and mbus.port:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((mbus.hostname or "127.0.0.1", mbus.port))
        except OSError as exc:
            print(f"ERROR - cannot listen on mbus port {mbus.port}: {exc}", file=sys.stderr, flush=True)
            return 1
        listener.listen(16)

    def stop(signum, frame):
        raise _Stop

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    store = os.path.join(args.base, "store")  # where a job keeps its data (/var/vcap/store)
    boot = {
        "pid": os.getpid(),
        "agent_id": settings["agent_id"],
        "booted_at": time.time(),
        "persistent": settings.get("disks", {}).get("persistent", {}),
        "store": sorted(os.listdir(store)) if os.path.isdir(store) else None,  # what the VM sees there
    }
    with open(os.path.join(args.base, "boots.jsonl"), "a") as handle:
        handle.write(json.dumps(boot) + "\n")
    print(f"INFO - agent {settings['agent_id']} running (pid {os.getpid()})", flush=True)
    try:
        while True:
            if listener is not None:
                conn, _ = listener.accept()
                conn.close()
            else:
                time.sleep(3600)
    except _Stop:
        print("INFO - agent stopping", flush=True)
    return 0


class _Stop(Exception):
    """Raised from the SIGTERM handler so that a blocking sleep or accept ends at once."""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
