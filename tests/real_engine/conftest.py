"""Session fixture: a real llama-server (built from source, cached) serving the tiny test model.

The first run on a machine builds llama-server (~5 min on 2 cores at -O1, see build_llama_server.sh);
later runs, from any clone, reuse ~/.cache/sglang-fleet/llama.cpp/<version>-<script hash>/llama-server. Deselect with `-m "not real_engine"`.
"""

from __future__ import annotations

import json
import pathlib
import socket
import subprocess
import time
import urllib.request

import pytest
from make_tiny_model import make_tiny_model

HERE = pathlib.Path(__file__).resolve().parent
BUILD = HERE / "build_llama_server.sh"
PARALLEL = 8
ALIAS = "tiny"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """A started llama-server: url, model alias, tokenizer folder, log file."""

    def __init__(self, binary: str, model_dir: pathlib.Path):
        self.binary = binary
        self.model_dir = model_dir
        self.gguf = model_dir / "model.gguf"
        self.tokenizer_dir = model_dir / "tokenizer"
        self.alias = ALIAS
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = model_dir / "llama-server.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 60.0) -> None:
        argv = [self.binary, "-m", str(self.gguf), "--alias", ALIAS, "--host", "127.0.0.1",
                "--port", str(self.port), "-np", str(PARALLEL), "-c", "32768", "-t", "2", "--metrics"]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    if r.status == 200 and json.loads(r.read()).get("status") == "ok":
                        return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"llama-server not healthy after {timeout_s} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def metric(self, name: str) -> float:
        """A llama-server /metrics value (e.g. llamacpp:tokens_predicted_total)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        raise KeyError(name)


@pytest.fixture(scope="session")
def llama_server_binary() -> str:
    """Path of the cached llama-server binary (built on first use)."""
    p = subprocess.run(["bash", str(BUILD)], check=False, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        pytest.fail(f"building llama-server failed (rc {p.returncode}):\n{p.stderr[-4000:]}")
    return p.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("tiny-model")
    make_tiny_model(out)
    return out


@pytest.fixture(scope="session")
def llama_server(llama_server_binary, tiny_model_dir):
    """A running llama-server on a free 127.0.0.1 port; stopped at the end of the session."""
    server = LlamaServer(llama_server_binary, tiny_model_dir)
    try:
        server.start()
    except RuntimeError as e:
        pytest.fail(str(e))
    yield server
    server.stop()
