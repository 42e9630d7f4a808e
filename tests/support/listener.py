"""An HTTP server on 127.0.0.1 that records every request reaching it: an endpoint that
someone other than the operator chose, to prove what the CPI does (not) send there."""

from __future__ import annotations


class Listener:
    """An HTTP server on 127.0.0.1 that records what reaches it (a cpi-config writer's
    endpoint) and answers 500."""

    def __init__(self, tls: tuple[str, str] | None = None):
        """`tls`: (certificate file, key file) to answer HTTPS with."""
        import http.server
        import threading

        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                seen.append({**dict(self.headers), "body": self.rfile.read(length).decode(errors="replace")})
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST

            def log_message(self, *args):
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls is not None:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
