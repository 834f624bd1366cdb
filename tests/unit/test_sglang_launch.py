"""roles/sglang_common/files/sglang_launch.py run as the unit runs it, with a stand-in server.

The stand-in does what SGLang does with its arguments: logs them at start-up (API key included,
as real SGLang's `server_args=` line), prints from a subprocess (SGLang's schedulers inherit fd 1
and 2), and dies by SIGKILL (what SGLang's kill_process_tree does to the whole tree on a fatal
error): everything it printed must reach the log, and no secret value.
"""
import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "roles" / "sglang_common" / "files" / "sglang_launch.py"
KEY, ADMIN, HF = "canary-K3y", "canary-Adm", "hf_canary"

SERVER = """
import logging, os, subprocess, sys
logging.basicConfig(format="[%(asctime)s] %(message)s")
logging.getLogger().warning("server_args=%r", sys.argv[1:])
print("env", os.environ.get("SGLANG_API_KEY"), os.environ.get("SGLANG_FLEET_SECRETS"), flush=True)
subprocess.run([sys.executable, "-c", "import os, sys; print('child', os.environ['HF_TOKEN']); "
                "sys.stdout.write('x' * 70000 + 'canary-K3y' + 'y' * 3); sys.stdout.flush()"])
print("last words", file=sys.stderr, flush=True)
os.kill(os.getpid(), 9)
"""


def launch(tmp_path, env):
    server = tmp_path / "server.py"
    server.write_text(SERVER)
    proc = subprocess.run([sys.executable, str(LAUNCHER), str(server), "--port", "1"], capture_output=True,
                          env={**os.environ, **env}, text=True, timeout=60, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def test_secrets_are_passed_in_process_and_redacted_in_everything_printed(tmp_path):
    rc, out, err = launch(tmp_path, {"SGLANG_API_KEY": KEY, "SGLANG_ADMIN_API_KEY": ADMIN, "HF_TOKEN": HF,
                                     "SGLANG_FLEET_SECRETS": "HF_TOKEN SGLANG_ADMIN_API_KEY SGLANG_API_KEY"})
    assert rc == -9 and err == ""          # stderr and stdout go the same way (the journal)
    lines = out.splitlines()
    assert lines[0].endswith("] server_args=['--port', '1', '--api-key', '<redacted>', "
                             "'--admin-api-key', '<redacted>']")
    # the child's unterminated 70 kB line is cut where no secret crosses; the parent's last words
    # after SIGKILL still arrive
    assert lines[1:] == ["env None None", "child <redacted>", "x" * 70000 + "<redacted>yyylast words"]
    assert KEY not in out and ADMIN not in out and HF not in out


def test_without_secrets_nothing_is_filtered(tmp_path):
    rc, out, err = launch(tmp_path, {"HF_TOKEN": "public"})
    assert rc == -9
    assert out.splitlines() == ["env None None", "child public", "x" * 70000 + "canary-K3yyyy"]
    assert "server_args=['--port', '1']" in err and err.endswith("last words\n")


def test_the_ssl_key_password_is_passed_in_process_and_redacted(tmp_path):
    rc, out, _ = launch(tmp_path, {"SGLANG_SSL_KEYFILE_PASSWORD": KEY, "SGLANG_FLEET_SECRETS": "SGLANG_SSL_KEYFILE_PASSWORD"})
    assert rc == -9
    assert out.splitlines()[0].endswith("] server_args=['--port', '1', '--ssl-keyfile-password', '<redacted>']")
    assert KEY not in out
