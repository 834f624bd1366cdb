"""bench_client runs on the hosts' own Python: every minor version an Ansible 2.19 target may have.

Each available interpreter (tests/host_pythons.py) runs the module file by path against the
misbehaving fake servers of this process; missing interpreters are skipped, by name.
"""

import json
import pathlib
import subprocess

import pytest
from fake_server import FakeServer, FullBacklog
from host_pythons import TARGET_MINORS, interpreter

MODULE = pathlib.Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "verify" / "bench_client.py"
DRIVER = """
import asyncio, importlib.util, json, sys
spec = importlib.util.spec_from_file_location("bench_client", sys.argv[1])
bc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bc)
kw = json.loads(sys.argv[3])
r = asyncio.run(bc.stream_request(sys.argv[2], "completions", bc.build_payload("completions", "m", " a b", 5), **kw))
print(json.dumps({"version": list(sys.version_info[:2]), "ok": r["ok"], "chunks": r["chunks"], "error": r["error"]}))
"""


@pytest.mark.parametrize("minor", TARGET_MINORS)
def test_stream_and_timeouts_on_every_target_python(minor):
    exe = interpreter(minor)
    if exe is None:
        pytest.skip(f"no Python 3.{minor} on this machine")

    def run(url, **kw):
        p = subprocess.run([exe, "-c", DRIVER, str(MODULE), url, json.dumps(kw)], capture_output=True, text=True,
                           timeout=30, check=False)
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)
        assert out.pop("version") == [3, minor]
        return out

    with FakeServer("ok", tokens=5) as s:
        assert run(s.url, timeout_s=5) == {"ok": True, "chunks": 5, "error": None}
    with FullBacklog() as url:
        assert run(url, timeout_s=5, connect_timeout_s=0.5)["error"] == (
            f"POST {url}/v1/completions: connect timeout after 0.5 s (connecting)")
    with FakeServer("stall") as s:
        assert run(s.url, timeout_s=0.5)["error"] == (f"POST {s.url}/v1/completions: request deadline of 0.5 s "
                                                      "exceeded (waiting for response headers)")
    with FakeServer("stall_stream", tokens=10, cut_after=3) as s:
        assert run(s.url, timeout_s=10, read_timeout_s=0.3)["error"] == (
            f"POST {s.url}/v1/completions: read timeout after 0.3 s (streaming, 3 chunks with output received)")
    with FakeServer("cut", tokens=10, cut_after=3) as s:
        assert run(s.url, timeout_s=5)["error"] == (
            f"POST {s.url}/v1/completions: connection closed by the server mid-stream "
            "(streaming, 3 chunks with output received; chunked body not finished)")
