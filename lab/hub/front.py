#!/usr/bin/env python3
"""The lab hub's thin front: a streaming reverse proxy to olah that answers as the real hub where olah does not.

    front.py --upstream 127.0.0.1:PORT --mirrors DIR --token TOKEN [--gated ORG/NAME ...] [--port 0] [--port-file F]

- Gated repositories: without `Authorization: Bearer <token>` 401 GatedRepo, with another token 403 GatedRepo.
- An error from olah for a repository that does not exist becomes 401 RepoNotFound, for a revision that does not
  resolve 404 RevisionNotFound (olah 0.5.4 answers 404 EntryNotFound or 500 there).
huggingface_hub 2.4.0 reads X-Error-Code / X-Error-Message in utils/_http.py:871-872 and maps GatedRepo at 888-892,
RevisionNotFound at 880-882, RepoNotFound (or a 401 on a repo API url) at 933-953, a bare 403 at 961-967.
Standard library only; run by hub.py, see lab/hub/README.md.
"""

import argparse
import http.client
import json
import os
import re
import subprocess
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host"}
# /api/models/<org>/<name>[/<verb>/<revision>...] and /<org>/<name>/resolve/<revision>/<file> (models only)
API = re.compile(r"^/api/models/([^/]+/[^/]+?)(?:/(?:revision|tree|paths-info|commits|refs|resolve)(?:/([^/]+))?.*)?$")
RESOLVE = re.compile(r"^/(?:models/)?([^/]+/[^/]+)/resolve/([^/]+)/")
ARGS = None


def repo_and_revision(path):
    """The repo id and the revision (unquoted; None when the url names none) a hub url is about."""
    m = API.match(path) or RESOLVE.match(path)
    if not m or m.group(1).startswith(("api/", "models/")):
        return None, None
    return m.group(1), unquote(m.group(2)) if m.group(2) else None


def resolves(repo_dir, revision):
    if revision.startswith("-"):
        return False
    return subprocess.run(["git", "-C", repo_dir, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
                          check=False, capture_output=True).returncode == 0


class Front(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        print(f"{self.address_string()} {fmt % args}", flush=True)

    def hub_error(self, status, code, message):
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def gate(self, repo):
        """The hub's answers for a gated repo: 401 without a token, 403 for a token without access."""
        auth = self.headers.get("Authorization", "")
        if auth == f"Bearer {ARGS.token}":
            return False
        if not auth:
            self.hub_error(401, "GatedRepo", f"Access to model {repo} is restricted. You must have access to it "
                                             "and be authenticated to access it. Please log in.")
        else:
            self.hub_error(403, "GatedRepo", f"Access to model {repo} is restricted and you are not in the "
                                             f"authorized list. Visit {self.endpoint()}/{repo} to ask for access.")
        return True

    def endpoint(self):
        return f"http://{self.headers.get('Host', '127.0.0.1')}"

    def translate(self, repo, revision):
        """olah's error for a repo or revision that does not exist, as the real hub answers it; else False."""
        repo_dir = os.path.join(ARGS.mirrors, "models", repo)
        if not os.path.isdir(os.path.join(repo_dir, ".git")):
            # olah: 404 EntryNotFound on resolve, other codes elsewhere; the hub: 401 RepoNotFound
            self.hub_error(401, "RepoNotFound", "Repository not found")
        elif revision and not resolves(repo_dir, revision):
            # olah: 500 (GitPython raises on an unknown full sha); the hub: 404 RevisionNotFound
            self.hub_error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        else:
            return False
        return True

    def forward(self):
        url = urlsplit(self.path)
        repo, revision = repo_and_revision(url.path)
        if repo in ARGS.gated and self.gate(repo):
            return
        target = self.path
        if repo and url.path.rstrip("/") == f"/api/models/{repo}":
            # model_info without a revision: olah 0.5.4 answers 401 RepoNotFound for a mirrored repo; the hub
            # answers the default branch (main here)
            target = f"/api/models/{repo}/revision/main" + (f"?{url.query}" if url.query else "")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        upstream = http.client.HTTPConnection(ARGS.upstream, timeout=600)
        try:
            upstream.request(self.command, target, body=body, headers=headers)
            resp = upstream.getresponse()
            if resp.status >= 400 and repo:
                data = resp.read()
                if not self.translate(repo, revision):
                    self.relay(resp, data)
            elif resp.status == 200 and "blobs=true" in url.query.lower() and "/tree/" not in url.path:
                self.relay(resp, self.with_blobs(upstream, repo, resp.read()))
            else:
                self.relay(resp)
        finally:
            upstream.close()

    def with_blobs(self, upstream, repo, data):
        """model_info(files_metadata=True) asks ?blobs=true: olah 0.5.4 ignores it, siblings lack size, blobId and
        lfs (read at huggingface_hub 2.4.0 hf_api.py:971-980); fill them in from olah's tree at the same sha."""
        info = json.loads(data)
        upstream.request("GET", f"/api/models/{repo}/tree/{info['sha']}/?recursive=true")
        tree = {e["path"]: e for e in json.loads(upstream.getresponse().read())}
        for sibling in info.get("siblings") or []:
            entry = tree.get(sibling["rfilename"], {})
            sibling.update(blobId=entry.get("oid"), size=entry.get("size"))
            if "lfs" in entry:
                sibling["lfs"] = {"sha256": entry["lfs"]["oid"], "size": entry["lfs"]["size"],
                                  "pointerSize": entry["lfs"]["pointerSize"]}
        return json.dumps(info).encode()

    def relay(self, resp, data=None):
        """Status, headers and body as olah sent them (data: the body already read), streamed; chunked when
        olah gave no Content-Length."""
        self.send_response(resp.status, resp.reason)
        skip = HOP | {"server", "date"} | ({"content-length"} if data is not None else set())
        for k, v in resp.getheaders():
            if k.lower() == "location":  # olah redirects to itself (e.g. tree/main -> tree/main/): keep clients here
                v = v.replace(f"://{ARGS.upstream}/", f"://{self.headers.get('Host', ARGS.upstream)}/", 1)
            if k.lower() not in skip:
                self.send_header(k, v)
        has_body = self.command != "HEAD" and resp.status not in (204, 304)
        if data is not None:
            self.send_header("Content-Length", str(len(data) if has_body else 0))
            self.end_headers()
            return self.wfile.write(data if has_body else b"")
        chunked = has_body and resp.getheader("Content-Length") is None
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if not has_body:
            return
        while chunk := resp.read1(1 << 20):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = forward


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="olah's host:port")
    parser.add_argument("--mirrors", required=True, help="olah's mirrors-path")
    parser.add_argument("--token", required=True, help="the lab token that opens gated repositories")
    parser.add_argument("--gated", action="append", default=[], help="a gated repo id (repeat)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", help="write the bound port here once listening")
    ARGS = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Front)
    server.daemon_threads = True
    if ARGS.port_file:
        with open(ARGS.port_file + ".tmp", "w") as f:
            f.write(str(server.server_address[1]))
        os.replace(ARGS.port_file + ".tmp", ARGS.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
