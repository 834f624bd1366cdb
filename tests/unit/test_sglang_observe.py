"""The observe layer (plugins/module_utils/transport/observe.py): the one way the project reads a host.

Real processes, a real HTTP server on 127.0.0.1 and systemctl's own output format; and a scan
that keeps every other module off `systemctl show` and off HTTP to the host.
"""

import json
import re
import subprocess
import sys
import time
import urllib.error

import pytest
from ansible_run import REPO
from local_http import QuietHandler, serving

from ansible_collections.sglang.fleet.plugins.module_utils.transport.observe import (
    VENV_MARKER,
    get_json,
    http_status,
    main_pid,
    process_start,
    read_cmdline,
    read_service,
    read_unit_argv,
    read_venv_marker,
    server_start,
    systemd_show,
)


def test_systemd_show_asks_one_property_per_flag_and_reads_its_lines():
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, "ActiveState=active\nMainPID=4242\nUnitFileState=enabled\n", ""

    props, error = systemd_show("sglang", ("ActiveState", "MainPID", "UnitFileState"), run)
    assert calls == [["systemctl", "show", "sglang", "-p", "ActiveState", "-p", "MainPID", "-p", "UnitFileState"]]
    assert (props, error, main_pid(props)) == ({"ActiveState": "active", "MainPID": "4242", "UnitFileState": "enabled"},
                                               None, 4242)


def test_a_failing_systemctl_is_an_error_not_a_stopped_service(tmp_path):
    props, error = systemd_show("sglang", ("MainPID",), lambda argv: (1, "", "Failed to connect to bus\n"))
    assert (props, error, main_pid(props)) == ({}, "Failed to connect to bus", 0)
    svc = read_service(lambda argv: (1, "", "Failed to connect to bus"), "sglang", str(tmp_path / "sglang.service"))
    assert svc == {"installed": False, "unit_file_state": "", "active_state": "", "main_pid": 0,
                   "systemctl_error": "Failed to connect to bus"}


@pytest.fixture
def child():
    before = time.time()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "with spaces"])
    deadline = time.monotonic() + 10   # a loaded machine: /proc shows the new argv a moment after exec
    while read_cmdline(proc.pid) != [sys.executable, "-c", "import time; time.sleep(60)", "with spaces"] \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    yield proc, before
    proc.kill()
    proc.wait()


def test_a_running_process_is_read_from_proc(child):
    proc, before = child
    assert read_cmdline(proc.pid) == [sys.executable, "-c", "import time; time.sleep(60)", "with spaces"]
    started = process_start(proc.pid)
    assert before - 1.0 <= started <= time.time() + 1.0  # /proc/stat's btime is whole seconds
    assert read_cmdline(0) is None
    assert process_start(2**22 + 1) is None  # above pid_max: no such process


class _Handler(QuietHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.headers.get("Authorization") not in (None, "Bearer right"):
            self.send_response(401)
            self.end_headers()
            return
        body = json.dumps({"path": self.path, "auth": self.headers.get("Authorization"),
                           "accept": self.headers.get("Accept")}).encode()
        self.send_response(200 if self.path != "/missing" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body if self.path != "/text" else b"not json")


@pytest.fixture
def server():
    with serving(_Handler) as url:
        yield url


def test_get_json_sends_the_key_and_leaves_each_failure_to_its_caller(server):
    assert get_json(server + "/server_info") == {"path": "/server_info", "auth": None, "accept": "application/json"}
    assert get_json(server + "/v", api_key="right")["auth"] == "Bearer right"
    with pytest.raises(urllib.error.HTTPError) as err:
        get_json(server + "/v", api_key="wrong")
    assert err.value.code == 401
    with pytest.raises(urllib.error.HTTPError) as err:
        get_json(server + "/missing")
    assert err.value.code == 404
    with pytest.raises(ValueError):
        get_json(server + "/text")


def test_http_status_is_the_status_or_why_nothing_answered(server):
    assert http_status(server + "/health_generate") == (200, "")
    assert http_status(server + "/missing") == (404, "")
    assert http_status(server + "/x", api_key="wrong") == (401, "")
    closed = server.rsplit(":", 1)[0] + ":1"
    assert http_status(closed + "/health_generate", timeout=5) == (None, "URLError")


def test_a_unit_files_exec_start_is_read_back_as_the_argv_systemd_runs(tmp_path):
    unit = tmp_path / "sglang.service"
    unit.write_text("[Service]\nExecStart=/v/bin/python /l.py sglang.launch_server \\\n"
                    "    --model-path \"/models/My Model\" \\\n    --served-model-name \"a $$x 50%%\"\n\n"
                    "Restart=on-failure\n")
    assert read_unit_argv(str(unit)) == ["/v/bin/python", "/l.py", "sglang.launch_server", "--model-path",
                                         "/models/My Model", "--served-model-name", "a $x 50%"]
    unit.write_text("[Service]\nType=simple\n")
    assert read_unit_argv(str(unit)) is None


def test_a_venv_is_finished_only_with_its_marker_and_from_the_lock_it_names(tmp_path):
    venv, lock = tmp_path / "sglang-0.5.11", tmp_path / "sglang-0.5.11-full.txt"
    venv.mkdir()
    lock.write_text("sglang==0.5.11 --hash=sha256:aa\n")
    assert read_venv_marker(str(venv), str(lock)) == "missing"  # a venv whose build stopped half way
    (venv / VENV_MARKER).write_text("sglang==0.5.11 --hash=sha256:bb\n")
    assert read_venv_marker(str(venv), str(lock)) == "differs"
    (venv / VENV_MARKER).write_text(lock.read_text())
    assert (read_venv_marker(str(venv), str(lock)), read_venv_marker(str(venv))) == ("matches", "present")
    assert read_venv_marker("", str(lock)) == "missing"


def test_no_other_module_reads_systemd_or_a_hosts_http_itself():
    """systemctl show, ExecStart= parsing, the venv marker and urllib GETs live in the observe layer (the PyPI index
    reader and the benchmark client talk to other things: the index, and the server under load)."""
    allowed = {"plugins/module_utils/transport/observe.py", "plugins/module_utils/compat/release_facts.py", "plugins/module_utils/verify/bench_client.py"}
    found = []
    for top in ("plugins", "roles"):
        for path in (REPO / top).rglob("*.py"):
            rel = str(path.relative_to(REPO))
            text = path.read_text(encoding="utf-8")
            if rel not in allowed and re.search(r'"systemctl",\s*"show"|urlopen\(|startswith\("ExecStart|sglang-fleet-lock',
                                                text):
                found.append(rel)
    assert found == []


def test_a_servers_lifetime_is_its_main_process_and_its_start(child):
    """sglang_bench's server_start: the same string for every read of one process, None without one."""
    proc, _before = child
    shown = lambda argv: (0, f"MainPID={proc.pid}\n", "")   # noqa: E731
    first = server_start("sglang", shown)
    assert first == server_start("sglang", shown) and first.endswith(f"Z pid {proc.pid}"), first
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d\dZ pid \d+", first)
    assert server_start("sglang", lambda argv: (0, "MainPID=0\n", "")) is None      # not running
    assert server_start("sglang", lambda argv: (1, "", "Failed to connect to bus")) is None
