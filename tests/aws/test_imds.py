"""current_vm_id reads the instance metadata service: IMDSv2 first, IMDSv1 otherwise."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cpi.clouds.aws.imds import instance_id
from cpi.errors import CloudError


def serve(tokens_required: bool):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            return

        def _answer(self, status: int, body: bytes):
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_PUT(self):  # IMDSv1-only services have no token endpoint
            if tokens_required and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                self._answer(200, b"token-1")
            else:
                self._answer(404, b"")

        def do_GET(self):
            if self.path != "/latest/meta-data/instance-id":
                self._answer(404, b"")
            elif tokens_required and self.headers.get("X-aws-ec2-metadata-token") != "token-1":
                self._answer(401, b"")
            else:
                self._answer(200, b"i-0abc123def4567890")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/latest"


@pytest.mark.parametrize("tokens_required", [True, False])
def test_instance_id_from_imds(tokens_required):
    server, base = serve(tokens_required)
    try:
        assert instance_id(base=base) == "i-0abc123def4567890"
    finally:
        server.shutdown()


def test_no_metadata_service_is_a_clear_error():
    server, base = serve(True)
    server.shutdown()
    server.server_close()
    with pytest.raises(CloudError) as err:
        instance_id(base=base, timeout=0.5)
    assert "is this CPI running on EC2" in err.value.message
