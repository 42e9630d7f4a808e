"""The local cloud's built-in VM process: a stand-in for bosh-agent.

Started exactly as a real bosh-agent would be (`-b BASE -P dummy -M dummy -C agent.json`),
it reads the settings the CPI wrote, records each boot in BASE/boots.jsonl (with what it
sees in BASE/store, where a job keeps its persistent data), listens on the
mbus port when the mbus is HTTPS (so one VM per port holds, as with the real agent), and
runs until SIGTERM. Standard library only: it runs as a script, outside the CPI's venv path.

With an HTTPS mbus and a certificate in env.bosh.mbus.cert it answers the agent protocol
as bosh-agent's HTTPS handler does (POST /agent, basic auth from the mbus URL): `ping`,
`get_task` and `update_settings`. As bosh-agent (agent/action/update_settings.go), an
update_settings that changes the mbus or blobstores is saved to BASE/bosh/update_settings.json
and the agent then exits 0, for its supervisor (supervisor.py, runit on a stemcell) to start
it again with them; the settings saved there win over the CPI's from then on.
"""

from __future__ import annotations

import argparse
import base64
import hmac
import json
import os
import signal
import socket
import ssl
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import NoReturn
from urllib.parse import SplitResult, unquote, urlsplit


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

    bosh_dir = os.path.join(args.base, "bosh")
    updated = _load(os.path.join(bosh_dir, "update_settings.json")) or {}
    listener = None
    mbus = urlsplit(_mbus_url(settings, updated))
    if mbus.scheme == "https" and mbus.port:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((mbus.hostname or "127.0.0.1", mbus.port))
        except OSError as exc:
            print(f"ERROR - cannot listen on mbus port {mbus.port}: {exc}", file=sys.stderr, flush=True)
            return 1
        listener.listen(16)

    def stop(signum: int, frame: FrameType | None) -> NoReturn:
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
    cert = _mbus_cert(settings, updated)
    try:
        if listener is not None and cert.get("certificate"):
            _serve(listener, _tls(cert, args.base), mbus, bosh_dir, updated)
        while True:
            if listener is not None:
                conn, _ = listener.accept()
                conn.close()
            else:
                time.sleep(3600)
    except _Stop:
        print("INFO - agent stopping", flush=True)
    return 0


def _load(path: str) -> dict | None:
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


def _save(path: str, doc: dict) -> None:
    """Atomically, private: update settings hold the mbus certificate's key."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    temp = f"{path}.{os.getpid()}.tmp"
    with open(temp, "w", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW, 0o600)) as handle:
        json.dump(doc, handle)
    os.replace(temp, path)


def _mbus_url(settings: dict, updated: dict) -> str:
    """As bosh-agent's GetMbusURL: update settings' URLs, then env.bosh.mbus.urls, then mbus."""
    env_urls = (((settings.get("env") or {}).get("bosh") or {}).get("mbus") or {}).get("urls")
    urls = (updated.get("mbus") or {}).get("urls") or env_urls or [settings.get("mbus") or ""]
    return urls[0]


def _mbus_cert(settings: dict, updated: dict) -> dict:
    """As bosh-agent's GetMbusCerts: the update settings' certificate once it has a CA."""
    cert = (updated.get("mbus") or {}).get("cert") or {}
    if cert.get("ca"):
        return cert
    return (((settings.get("env") or {}).get("bosh") or {}).get("mbus") or {}).get("cert") or {}


def _tls(cert: dict, base: str) -> ssl.SSLContext:
    """A server context with the mbus certificate (ssl loads it from files only: private
    ones in BASE, removed once loaded)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    paths = [os.path.join(base, f".mbus-{name}-{os.getpid()}.pem") for name in ("cert", "key")]
    try:
        for path, pem in zip(paths, (cert["certificate"], cert.get("private_key") or ""), strict=True):
            with open(path, "w", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW | os.O_EXCL, 0o600)) as handle:
                handle.write(pem)
        context.load_cert_chain(paths[0], paths[1])
    finally:
        for path in paths:
            if os.path.exists(path):
                os.unlink(path)
    return context


def _serve(listener: socket.socket, context: ssl.SSLContext, mbus: SplitResult, bosh_dir: str,
           updated: dict) -> None:
    """Answer the agent protocol on the mbus until SIGTERM (_Stop), or exit 0 after an
    update_settings that needs a restart."""
    expected = None
    if mbus.username is not None:
        token = base64.b64encode(f"{unquote(mbus.username)}:{unquote(mbus.password or '')}".encode()).decode()
        expected = f"Basic {token}"
    tasks_path = os.path.join(bosh_dir, "tasks.json")

    def update_settings(new: dict) -> tuple[object, bool]:
        """bosh-agent's MergeSettings: mbus and blobstores replace the saved ones when given
        and different, which needs a restart; trusted certs and disk associations are kept."""
        merged = dict(updated, trusted_certs=new.get("trusted_certs"), disk_associations=new.get("disk_associations"))
        restart = False
        for key, empty in (("mbus", {}), ("blobstores", None)):
            if new.get(key) not in (empty, None) and new.get(key) != updated.get(key):
                merged[key], restart = new[key], True
        _save(os.path.join(bosh_dir, "update_settings.json"), merged)
        updated.clear()
        updated.update(merged)
        task_id = str(uuid.uuid4())
        tasks = _load(tasks_path) or {}
        tasks[task_id] = "ok"  # done: what bosh-agent's persistent task resumes to after the restart
        _save(tasks_path, tasks)
        return {"agent_task_id": task_id, "state": "running" if restart else "done"}, restart

    def answer(request: dict) -> tuple[dict, bool]:
        method, arguments = request.get("method"), request.get("arguments") or []
        if method == "ping":
            return {"value": "pong"}, False
        if method == "get_task" and arguments:
            tasks = _load(tasks_path) or {}
            if arguments[0] not in tasks:
                return {"exception": {"message": f"Task with id {arguments[0]} could not be found"}}, False
            return {"value": tasks[arguments[0]]}, False
        if method == "update_settings" and arguments and isinstance(arguments[0], dict):
            value, restart = update_settings(arguments[0])
            return {"value": value}, restart
        return {"exception": {"message": f"unknown message {method}"}}, False

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if expected and not hmac.compare_digest((self.headers.get("Authorization") or "").encode(),
                                                    expected.encode()):
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm=""')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.path != "/agent":
                self.send_error(404)
                return
            try:
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            except ValueError:
                self.send_error(400)
                return
            response, restart = answer(request if isinstance(request, dict) else {})
            body = json.dumps(response).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            if restart:
                print("INFO - update_settings changed the mbus or blobstores: exiting for the supervisor "
                      "to start the agent again with them", flush=True)
                os._exit(0)  # as bosh-agent's agent killer: a restart is how new settings take effect

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's name)
            print(f"INFO - mbus: {format % args}", flush=True)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: object, client_address: tuple[str, int]) -> None:
            # a port probe (spawn, the supervisor) or a client without the CA: one line, no trace
            print(f"INFO - mbus: connection from {client_address[0]} ended: {sys.exc_info()[1]}", flush=True)

    server = Server(listener.getsockname()[:2], Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = context.wrap_socket(listener, server_side=True, do_handshake_on_connect=False)
    server.serve_forever(poll_interval=3600)


class _Stop(Exception):
    """Raised from the SIGTERM handler so that a blocking sleep or accept ends at once."""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
