"""What the stand-ins for the managers beside the vCenter (NSX-V, NSX-T) share: an HTTPS
server on 127.0.0.1 that hands each request to one function, and the simulator's VMs as such
a manager's inventory sees them."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.faults.proxy import _tls_context


class Server:
    """`serve(handler, method)` answers every GET, PUT, PATCH, POST and DELETE, on its own thread;
    `address` is `127.0.0.1:<port>`."""

    def __init__(self, serve: Callable[[BaseHTTPRequestHandler, str], None]):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet: the tests read what the stand-in records
                return

            def do_GET(self) -> None:
                serve(self, "GET")

            def do_PUT(self) -> None:
                serve(self, "PUT")

            def do_PATCH(self) -> None:
                serve(self, "PATCH")

            def do_POST(self) -> None:
                serve(self, "POST")

            def do_DELETE(self) -> None:
                serve(self, "DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = _tls_context().wrap_socket(self.server.socket, server_side=True)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def vms(si: Any) -> list[Any]:
    """Every VM of the vCenter `si` is connected to."""
    from pyVmomi import vim

    view = si.content.viewManager.CreateContainerView(si.content.rootFolder, [vim.VirtualMachine], True)
    try:
        return list(view.view)
    finally:
        view.DestroyView()


#: the system's CAs, none of which signed a stand-in's self-signed certificate
SYSTEM_CAS = "/etc/ssl/certs/ca-certificates.crt"
#: the CA settings the TLS tests of the managers try: none, the stand-in's own certificate
#: (which verifies it), the system's CAs (which do not)
TRUST_CASES = {"true-no-ca": (True, None, False), "true-own-ca": (True, "own", True),
               "false-other-ca": (False, SYSTEM_CAS, True)}


def trust(address: str, ca: str | None) -> dict[str, str]:
    """A manager's `ca_cert`/`ca_cert_file` for the stand-in at `address`: nothing (None), its
    own certificate ("own", fetched by a handshake, no request) or the file `ca`."""
    if ca == "own":
        host, port = address.split(":")
        return {"ca_cert": ssl.get_server_certificate((host, int(port)))}
    return {"ca_cert_file": ca} if ca is not None else {}
