"""An HTTP server on 127.0.0.1 for the tests that need one answering as a host's server would."""

import contextlib
import http.server
import threading


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """A request handler that keeps the test output clean (no access log on stderr)."""

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serving(handler):
    """Serve `handler` (a QuietHandler) on a free port of 127.0.0.1; yields its base URL."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
