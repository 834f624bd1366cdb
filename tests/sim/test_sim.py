"""The SGLang simulator (lab/sglang_sim) run as a subprocess, against real sglang release trees.

Each server is laid out like a lab host: `sglang_sim.py` and the `sglang_source/` package side by side in a
temporary /opt/sglang-sim, the extracted wheel's folder on PYTHONPATH (so `find_spec("sglang")`
finds it, without importing it), the JSON config in $SGLANG_SIM_CONFIG.
"""
from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import math
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
SIM = REPO / "lab" / "sglang_sim" / "sglang_sim.py"

pytestmark = pytest.mark.wheels

_spec = importlib.util.spec_from_file_location("_wheels", REPO / "tests" / "wheels.py")
_wheels = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_wheels)

A6000X2 = {"gpu_model": "NVIDIA RTX A6000", "gpu_count": 2, "compute_capability": "8.6",
           "hbm_bandwidth_gbs": 768}
QWEN36 = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
          "text_config": {"hidden_size": 5120, "num_hidden_layers": 64},
          "vision_config": {"depth": 27}}
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
# The seeds' flags, as the lab's ct129 runs them: 0.5.10 - 0.5.13.post1 refuse speculative decoding
# on this hybrid linear-attention model with the radix cache on (see test_refused_at_start_...).
SEEDS_ARGV = ["--tp", "2", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
              "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
              "--mem-fraction-static", "0.88", "--context-length", "131072"]
CT129_ARGV = SEEDS_ARGV + ["--disable-radix-cache"]
MTP1_ARGV = ["--tp", "2", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1",
             "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2",
             "--disable-radix-cache"]
ORACLE = REPO / "tests" / "fixtures" / "oracle"


SOURCE_READER = REPO / "plugins" / "module_utils" / "source"   # the reader package


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sim:
    """One simulator process laid out like a lab host."""

    def __init__(self, root: pathlib.Path, version: str, argv: list, config: dict | None = None,
                 model: dict | None = QWEN36, weight_bytes: int | None = 27_000_000_000):
        opt = root / "opt" / "sglang-sim"
        opt.mkdir(parents=True, exist_ok=True)
        shutil.copy(SIM, opt / "sglang_sim.py")
        shutil.copytree(SOURCE_READER, opt / "sglang_source", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
        self.model = root / "models" / "Qwen3.6-27B"
        if model is not None:
            self.model.mkdir(parents=True, exist_ok=True)
            (self.model / "config.json").write_text(json.dumps(model))
            if weight_bytes:
                (self.model / "model.safetensors.index.json").write_text(
                    json.dumps({"metadata": {"total_size": weight_bytes}, "weight_map": {}}))
        cfg = root / "config.json"
        cfg.write_text(json.dumps({**A6000X2, **(config or {})}))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        tree = _wheels.sglang_source_tree(version).parent
        env = {**os.environ, "PYTHONPATH": str(tree), "SGLANG_SIM_CONFIG": str(cfg)}
        self.argv = ["--model-path", str(self.model), "--port", str(self.port)] + argv
        self.proc = subprocess.Popen([sys.executable, str(opt / "sglang_sim.py")] + self.argv,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)

    def wait_listening(self, timeout=20.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"simulator exited {self.proc.returncode}: "
                                     f"{self.proc.stderr.read()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("simulator did not listen")

    def wait_healthy(self, timeout=20.0) -> None:
        self.wait_listening(timeout)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.get("/health_generate")[0] == 200:
                return
            time.sleep(0.05)
        raise AssertionError("simulator never became healthy")

    def request(self, path, body=None, headers=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def get(self, path, headers=None):
        return self.request(path, headers=headers)

    def json(self, path, body=None, headers=None):
        code, raw = self.request(path, body, headers)
        assert code == 200, (code, raw)
        return json.loads(raw)

    def stream(self, path, body, headers=None):
        """[(arrival time, parsed SSE data)] of a streaming request, '[DONE]' kept as a string."""
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers=headers or {})
        events = []
        with urllib.request.urlopen(req, timeout=120) as resp:
            assert resp.headers["Content-Type"] == "text/event-stream"
            for line in resp:
                line = line.decode().rstrip("\n")
                if line.startswith("data: "):
                    data = line[6:]
                    events.append((time.monotonic(), data if data == "[DONE]" else json.loads(data)))
        return events

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture
def sim(tmp_path):
    started = []

    def start(version, argv, **kw):
        s = Sim(tmp_path / f"host{len(started)}", version, argv, **kw)
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()


@pytest.fixture(scope="module")
def ct129(tmp_path_factory):
    """The seeds' ct129 profile on 0.5.11, with metrics and an API key."""
    s = Sim(tmp_path_factory.mktemp("ct129"), "0.5.11",
            CT129_ARGV + ["--enable-metrics", "--api-key", "s3cret"])
    s.wait_healthy()
    yield s
    s.stop()


AUTH = {"Authorization": "Bearer s3cret"}


def decode_rate(events) -> float:
    times = [t for t, e in events if e != "[DONE]" and e.get("choices")]
    return (len(times) - 1) / (times[-1] - times[0])


def run_to_exit(s: Sim, timeout=30):
    try:
        s.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pytest.fail("simulator did not exit")
    return s.proc.returncode, s.proc.stderr.read()


# ----------------------------------------------------------------------------- argv


@pytest.mark.parametrize(("version", "extra", "error"), [
    ("0.5.11", ["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    ("0.5.20", ["--disable-piecewise-cuda-graph"],
     "unrecognized arguments: --disable-piecewise-cuda-graph"),
    ("0.5.20", ["--cuda-graph-max-bs", "8"],
     ("ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
      "--cuda-graph-max-bs-prefill")),
])
def test_bad_argv_exits_2_with_argparse_error(sim, version, extra, error):
    s = sim(version, ["--tp", "2"] + extra)
    rc, err = run_to_exit(s)
    assert rc == 2
    assert err.startswith("usage: sglang serve [-h] ")
    assert err.endswith(f"\nsglang serve: error: {error}\n")


def test_removed_flag_still_accepted_on_0_5_11(sim):
    s = sim("0.5.11", ["--tp", "2", "--disable-piecewise-cuda-graph"], model=LLAMA)
    s.wait_healthy()
    assert s.json("/server_info")["disable_piecewise_cuda_graph"] is True


def test_missing_model_path_fails_clearly(sim):
    s = sim("0.5.11", ["--tp", "2"], model=None)
    rc, err = run_to_exit(s)
    assert rc == 1
    assert f"Can't load the configuration of '{s.model}'" in err


def test_tp_larger_than_declared_gpus_fails(sim):
    s = sim("0.5.11", ["--tp", "4"])
    rc, err = run_to_exit(s)
    assert rc == 1
    assert "tp_size=4 needs 4 GPUs, this host declares 2 (NVIDIA RTX A6000)" in err


def test_config_yaml_is_merged_cli_wins(sim, tmp_path):
    yml = tmp_path / "launch.yaml"
    yml.write_text("tp-size: 2\nspeculative-algorithm: NEXTN\nenable-metrics: true\n"
                   "context-length: 4096\ndisable-radix-cache: true\n")
    s = sim("0.5.11", ["--config", str(yml), "--context-length", "8192"])
    s.wait_healthy()
    info = s.json("/server_info")
    assert (info["tp_size"], info["speculative_algorithm"], info["enable_metrics"],
            info["context_length"]) == (2, "EAGLE", True, 8192)


# ----------------------------------------------------------------------------- resolution


def test_ct129_server_info_resolution(ct129):
    ct129.json("/generate", {"text": "a", "sampling_params": {"max_new_tokens": 16}}, headers=AUTH)
    for path in ("/server_info", "/get_server_info"):
        info = ct129.json(path, headers=AUTH)
        assert info["version"] == "0.5.11"
        assert info["tp_size"] == 2
        assert info["disable_piecewise_cuda_graph"] is True      # multimodal rule (0.5.11)
        assert (info["speculative_algorithm"], info["speculative_num_steps"],
                info["speculative_eagle_topk"], info["speculative_num_draft_tokens"]) == (
            "EAGLE", 3, 1, 4)
        assert info["mem_fraction_static"] == 0.88
        assert info["enable_two_batch_overlap"] is False
        assert info["api_key"] == "s3cret"       # in clear, as in the real record
        assert "launch_command" not in info      # 0.5.11 has none (from 0.5.20)
        assert 2.5 < info["internal_states"][0]["avg_spec_accept_length"] <= 3.2


@pytest.mark.parametrize("version, launch, logged", [
    ("0.5.11", None, "server_args=ServerArgs(model_path="),
    ("0.5.18", None, "server_args=ServerArgs(model_path="),
    ("0.5.20", "--api-key canary-k3y --admin-api-key=canary-adm1n", "server_args={'model_path': "),
    ("0.5.23", "--api-key canary-k3y --admin-api-key=canary-adm1n", "server_args={'model_path': "),
])
def test_secrets_in_clear_as_in_the_real_release(sim, version, launch, logged):
    """/server_info and the start-up log carry the keys, as real SGLang's do (see sglang_sim.py)."""
    s = sim(version, ["--tp", "2", "--api-key", "canary-k3y", "--admin-api-key=canary-adm1n"], model=LLAMA)
    s.wait_healthy()
    info = s.json("/server_info", headers={"Authorization": "Bearer canary-k3y"})
    assert (info["api_key"], info["admin_api_key"]) == ("canary-k3y", "canary-adm1n")
    if launch is None:
        assert "launch_command" not in info
    else:
        assert info["launch_command"] == f"--model-path {s.model} --port {s.port} --tp 2 {launch}"
    s.proc.terminate()
    err = s.proc.communicate(timeout=10)[1]
    line = next(ln for ln in err.splitlines() if "server_args=" in ln)
    assert logged in line and "'canary-k3y'" in line and "'canary-adm1n'" in line


def test_speculative_auto_choice_when_unset(sim):
    s = sim("0.5.11", ["--tp", "2", "--speculative-algorithm", "NEXTN", "--disable-radix-cache"])
    s.wait_healthy()
    info = s.json("/server_info")
    assert (info["speculative_algorithm"], info["speculative_num_steps"],
            info["speculative_eagle_topk"], info["speculative_num_draft_tokens"]) == (
        "EAGLE", 3, 1, 4)
    assert info["mem_fraction_static"] == 0.85


def test_with_topk_1_the_draft_tokens_follow_the_steps_up_to_0_5_11(sim):
    """0.5.11 srt/server_args.py:3539-3546 adjusts the draft tokens to steps + 1 when topk is 1, so 4 -> 2
    alone changes nothing there (regression.yml's seeds case measures exactly that)."""
    argv = [a if a != "4" else "2" for a in CT129_ARGV]   # --speculative-num-draft-tokens 2, 3 steps
    s = sim("0.5.11", argv)
    s.wait_healthy()
    info = s.json("/server_info")
    assert (info["speculative_num_steps"], info["speculative_num_draft_tokens"]) == (3, 4)
    assert 50 <= decode_rate(s.stream("/v1/completions", {"prompt": "go", "max_tokens": 150, "stream": True})) <= 57


def test_piecewise_on_for_a_text_model(sim):
    s = sim("0.5.11", ["--tp", "2"], model=LLAMA)
    s.wait_healthy()
    info = s.json("/server_info")
    assert info["disable_piecewise_cuda_graph"] is False
    assert info["speculative_algorithm"] is None
    assert info["enable_flashinfer_allreduce_fusion"] is False     # SM86: no fusion kernels
    assert s.get("/sim/findings")[0] == 404     # no view of predict()'s findings (the code under test)


@pytest.mark.parametrize("release", ["0.5.11", "0.5.13.post1"])
def test_refused_at_start_like_sglang_for_the_seeds_flags(sim, release):
    """SGLang's own ServerArgs (the oracle fixture, scripts/sglang_oracle.py) raises for the seeds'
    argv on these releases; the simulator exits 1 at start with the same error and line."""
    err_want = json.loads((ORACLE / release / "ct129.json").read_text())["startup_error"]
    s = sim(release, SEEDS_ARGV)
    rc, err = run_to_exit(s)
    assert rc == 1
    assert f'File "sglang/{err_want["file"]}", line {err_want["line"]}, in _handle_mamba_radix_cache' in err
    assert err.rstrip("\n").endswith(f"{err_want['type']}: {err_want['message']}")


def test_the_seeds_flags_start_where_sglang_accepts_them(sim):
    assert json.loads((ORACLE / "0.5.15.post1" / "ct129.json").read_text())["resolved"]
    s = sim("0.5.15.post1", SEEDS_ARGV)
    s.wait_healthy()
    assert s.json("/server_info")["speculative_algorithm"] == "EAGLE"


def test_ct129_profile_on_0_5_20(sim):
    s = sim("0.5.20", CT129_ARGV)
    s.wait_healthy()
    info = s.json("/server_info")
    assert info["version"] == "0.5.20"
    assert "disable_piecewise_cuda_graph" not in info            # flag removed in 0.5.20
    # 0.5.18+ publish the resolved backend in cuda_graph_config and keep the flag as given (unset here),
    # as the real 0.5.23 does (lab host cpu1: cuda_graph_backend_prefill None, the config's backend set)
    assert info["cuda_graph_backend_prefill"] is None
    assert info["cuda_graph_config"]["prefill"]["backend"] == "breakable"     # Qwen3.5 on the allow-list
    assert (info["speculative_algorithm"], info["speculative_num_steps"],
            info["speculative_eagle_topk"], info["speculative_num_draft_tokens"]) == (
        "EAGLE", 3, 1, 4)


def test_model_info_and_models(ct129):
    for path in ("/model_info", "/get_model_info"):
        info = ct129.json(path, headers=AUTH)
        assert info["model_path"] == str(ct129.model)
        assert info["tokenizer_path"] == str(ct129.model)
        assert info["is_generation"] is True
        assert info["architectures"] == ["Qwen3_5ForConditionalGeneration"]
        assert info["model_type"] == "qwen3_5"
        assert info["has_image_understanding"] is True
    models = ct129.json("/v1/models", headers=AUTH)
    assert [m["id"] for m in models["data"]] == [str(ct129.model)]
    assert models["data"][0]["max_model_len"] == 131072


# ----------------------------------------------------------------------------- generation


def test_streamed_completion_exact_tokens_and_usage(ct129):
    events = ct129.stream("/v1/completions", {"model": "x", "prompt": "one two three four",
                                              "max_tokens": 7, "stream": True, "ignore_eos": True,
                                              "stream_options": {"include_usage": True}},
                          headers=AUTH)
    assert events[-1][1] == "[DONE]"
    chunks = [e for _, e in events[:-1]]
    text = [c["choices"][0]["text"] for c in chunks if c["choices"]]
    assert text == list("ABCDEFG")
    assert [c["choices"][0]["finish_reason"] for c in chunks[:7]] == [None] * 6 + ["length"]
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 4, "completion_tokens": 7, "total_tokens": 11}


def test_streamed_chat_max_completion_tokens(ct129):
    events = ct129.stream("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "say five words please"}],
        "max_completion_tokens": 30, "stream": True}, headers=AUTH)
    chunks = [e for _, e in events[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert len(deltas) == 30
    assert deltas[0] == {"role": "assistant", "content": "A"}
    assert "".join(d["content"] for d in deltas) == "ABCDEFGHIJKLMNOPQRSTUVWXYZABCD"
    assert all("usage" not in c for c in chunks)      # no include_usage


def test_non_streaming_usage(ct129):
    out = ct129.json("/v1/chat/completions", {"messages": [{"role": "user", "content": "a b c"}],
                                              "max_tokens": 5}, headers=AUTH)
    assert out["object"] == "chat.completion"
    assert out["choices"][0]["message"] == {"role": "assistant", "content": "ABCDE"}
    assert out["usage"] == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
    out = ct129.json("/v1/completions", {"prompt": "x y", "max_tokens": 3}, headers=AUTH)
    assert out["choices"][0]["text"] == "ABC"
    assert out["usage"]["completion_tokens"] == 3


def test_native_generate(ct129):
    out = ct129.json("/generate", {"text": "hello there", "sampling_params": {
        "max_new_tokens": 12, "ignore_eos": True}}, headers=AUTH)
    assert out["text"] == "ABCDEFGHIJKL"
    meta = out["meta_info"]
    assert (meta["prompt_tokens"], meta["completion_tokens"]) == (2, 12)
    assert meta["spec_verify_ct"] == 4            # ceil(12 / 3.19)
    assert meta["finish_reason"] == {"type": "length", "length": 12}
    assert 0.1 < meta["e2e_latency"] < 1.0
    out = ct129.json("/generate", {"input_ids": [1, 2, 3, 4, 5], "sampling_params": {
        "max_new_tokens": 2}}, headers=AUTH)
    assert out["meta_info"]["prompt_tokens"] == 5
    events = ct129.stream("/generate", {"text": "a", "stream": True,
                                        "sampling_params": {"max_new_tokens": 3}}, headers=AUTH)
    assert [e["text"] for _, e in events[:-1]][-1] == "ABC"


def test_ct129_single_stream_rate(ct129):
    events = ct129.stream("/v1/completions", {"prompt": "go", "max_tokens": 150, "stream": True},
                          headers=AUTH)
    rate = decode_rate(events)
    assert 50 <= rate <= 57, rate


def test_one_step_mtp_rate(sim):
    s = sim("0.5.11", MTP1_ARGV)
    s.wait_healthy()
    rate = decode_rate(s.stream("/v1/completions", {"prompt": "go", "max_tokens": 100,
                                                    "stream": True}))
    assert 35 <= rate <= 40, rate
    info = s.json("/server_info")
    assert (info["speculative_num_steps"], info["speculative_num_draft_tokens"]) == (1, 2)


def test_batch_of_8_costs_about_5_percent(ct129):
    body = {"prompt": "go", "max_tokens": 100, "stream": True}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        rates = list(pool.map(lambda _: decode_rate(ct129.stream("/v1/completions", body,
                                                                 headers=AUTH)), range(8)))
    single = 53.8
    assert all(single / 1.08 < r < single / 1.02 for r in rates), rates


# ----------------------------------------------------------------------------- metrics, auth


METRIC_NAMES = ("sglang:gen_throughput", "sglang:num_running_reqs", "sglang:token_usage",
                "sglang:spec_accept_length", "sglang:time_to_first_token_seconds_bucket",
                "sglang:inter_token_latency_seconds_bucket",
                "sglang:e2e_request_latency_seconds_count", "sglang:prompt_tokens_total",
                "sglang:generation_tokens_total")


def test_metrics_with_enable_metrics(ct129):
    ct129.json("/generate", {"text": "a b", "sampling_params": {"max_new_tokens": 4}},
               headers=AUTH)
    code, raw = ct129.get("/metrics")           # no key needed, like the real server
    assert code == 200
    text = raw.decode()
    samples = {line.split("{")[0] for line in text.splitlines() if not line.startswith("#")}
    assert set(METRIC_NAMES) <= samples
    assert "# TYPE sglang:time_to_first_token_seconds histogram" in text
    # a counter's family is named with _total, as prometheus_client writes it for the real server
    assert "# TYPE sglang:generation_tokens_total counter" in text and "# TYPE sglang:generation_tokens " not in text
    gen = [line for line in text.splitlines() if line.startswith("sglang:generation_tokens_total")]
    assert float(gen[0].rsplit(" ", 1)[1]) >= 4


def test_no_metrics_without_flag(sim):
    s = sim("0.5.11", ["--tp", "2"])
    s.wait_healthy()
    assert s.get("/metrics")[0] == 404


def test_api_key_enforced(ct129):
    assert ct129.get("/v1/models")[0] == 401
    assert ct129.get("/v1/models", {"Authorization": "Bearer wrong"})[0] == 401
    code, raw = ct129.request("/v1/completions", {"prompt": "a", "max_tokens": 1})
    assert (code, json.loads(raw)) == (401, {"error": "Unauthorized"})
    assert ct129.get("/v1/models", AUTH)[0] == 200
    assert ct129.get("/health")[0] == 200        # health is always open


# ----------------------------------------------------------------------------- faults


def test_never_healthy(sim):
    s = sim("0.5.11", ["--tp", "2"], config={"never_healthy": True})
    s.wait_listening()
    time.sleep(1.5)
    assert s.get("/health_generate")[0] == 503
    assert s.get("/health")[0] == 503
    assert s.request("/v1/completions", {"prompt": "a", "max_tokens": 1})[0] == 503
    assert s.json("/server_info")["tp_size"] == 2


def test_slow_start(sim):
    s = sim("0.5.11", ["--tp", "2"], config={"slow_start_s": 2})
    s.wait_listening()
    t0 = time.monotonic()
    assert s.get("/health_generate")[0] == 503
    s.wait_healthy()
    assert time.monotonic() - t0 > 1.5


def test_degrade_factor(sim):
    s = sim("0.5.11", CT129_ARGV, config={"degrade_factor": 0.5})
    s.wait_healthy()
    rate = decode_rate(s.stream("/v1/completions", {"prompt": "go", "max_tokens": 60,
                                                    "stream": True}))
    assert 25 <= rate <= 28.5, rate


def test_slow_release_slows_only_the_release_it_names(sim):
    """slow_release 0.5.11=0.5: 0.5.11 decodes at half its speed; 0.5.13.post1 on the same config does not."""
    config = {"slow_release": "0.5.13.post1=0.99;0.5.11=0.5"}
    slow = sim("0.5.11", CT129_ARGV, config=config)
    slow.wait_healthy()
    assert 25 <= decode_rate(slow.stream("/v1/completions", {"prompt": "go", "max_tokens": 60, "stream": True})) <= 28.5
    other = sim("0.5.11", CT129_ARGV, config={"slow_release": "0.5.13.post1=0.5"})
    other.wait_healthy()
    assert 50 <= decode_rate(other.stream("/v1/completions", {"prompt": "go", "max_tokens": 60, "stream": True})) <= 57


@pytest.mark.parametrize("value", ["0.5.11", "0.5.11=0", "0.5.11=fast", "=0.5"])
def test_a_slow_release_that_is_not_version_eq_factor_exits_1(sim, value):
    rc, err = run_to_exit(sim("0.5.11", CT129_ARGV, config={"slow_release": value}))
    assert rc == 1 and "is not <version>=<factor> with a factor in (0, 10]" in err, err


def request_rates(s, n, tokens=24):
    s.wait_healthy()
    return [decode_rate(s.stream("/v1/completions", {"prompt": "go", "max_tokens": tokens, "stream": True}))
            for _ in range(n)]


def test_noise_cv_spreads_each_requests_speed_the_same_way_for_a_seed(sim):
    """noise_cv 0.15: each request's decode speed is the model's times exp(N(0, 0.15)), drawn in request
    order from noise_seed, so two simulators with one seed pace the same sequence."""
    first = request_rates(sim("0.5.11", CT129_ARGV, config={"noise_cv": 0.15, "noise_seed": 7}), 6)
    again = request_rates(sim("0.5.11", CT129_ARGV, config={"noise_cv": 0.15, "noise_seed": 7}), 6)
    logs = [math.log(r) for r in first]
    mean = sum(logs) / len(logs)
    spread = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    assert 0.05 < spread < 0.35, first
    # the same draws: the two sequences move together (a measured rate also carries this machine's load,
    # a few % per request, so element by element equality was load-sensitive)
    assert statistics.correlation(logs, [math.log(r) for r in again]) > 0.8, (first, again)


@pytest.mark.parametrize(("value", "error"), [(1.0, "noise_cv is 1.0: it must be a number in [0, 1)"),
                                              (-0.1, "noise_cv is -0.1"), ("high", "noise_cv is 'high'")])
def test_a_noise_knob_outside_0_1_exits_1_naming_it(sim, value, error):
    rc, err = run_to_exit(sim("0.5.11", CT129_ARGV, config={"noise_cv": value}))
    assert rc == 1 and f"sglang-sim: {error}" in err, err


def test_disable_speculative(sim):
    s = sim("0.5.11", CT129_ARGV, config={"disable_optimization": "speculative"})
    s.wait_healthy()
    info = s.json("/server_info")
    assert info["speculative_algorithm"] is None
    assert info["speculative_num_steps"] is None
    assert "avg_spec_accept_length" not in info["internal_states"][0]
    out = s.json("/generate", {"text": "a", "sampling_params": {"max_new_tokens": 40}})
    assert "spec_verify_ct" not in out["meta_info"]
    rate = decode_rate(s.stream("/v1/completions", {"prompt": "go", "max_tokens": 40,
                                                    "stream": True}))
    assert 21 <= rate <= 24, rate


def test_disable_piecewise_cuda_graph(sim):
    s = sim("0.5.11", ["--tp", "2"], model=LLAMA,
            config={"disable_optimization": "piecewise_cuda_graph"})
    s.wait_healthy()
    assert s.json("/server_info")["disable_piecewise_cuda_graph"] is True


def test_disable_piecewise_on_0_5_20(sim):
    s = sim("0.5.20", CT129_ARGV, config={"disable_optimization": "piecewise_cuda_graph"})
    s.wait_healthy()
    assert s.json("/server_info")["cuda_graph_config"]["prefill"]["backend"] == "disabled"


def test_disable_optimization_unknown_name_fails(sim):
    s = sim("0.5.11", ["--tp", "2"], config={"disable_optimization": "warp_drive"})
    rc, err = run_to_exit(s)
    assert rc == 1
    assert "disable_optimization='warp_drive' matches no setting" in err


def test_crash_after_requests(sim):
    s = sim("0.5.11", ["--tp", "2"], config={"crash_after_requests": 2})
    s.wait_healthy()
    body = {"prompt": "a", "max_tokens": 2}
    assert s.json("/v1/completions", body)["usage"]["completion_tokens"] == 2
    assert s.get("/health_generate")[0] == 200      # health checks do not count
    assert s.json("/v1/completions", body)["usage"]["completion_tokens"] == 2
    rc, err = run_to_exit(s, timeout=5)
    assert rc == 1
    assert "simulated crash after 2 generation requests" in err


# ----------------------------------------------------------------------------- the real server as the oracle

REAL_0_5_23 = json.loads((pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "real_sglang"
                          / "0.5.23-cpu-server_info.json").read_text())
TINY_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "max_position_embeddings": 4096,
              "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}
# ServerArgs fields the real 0.5.23 answers that have no command-line flag (the simulator builds its
# answer from the release's parser): known, listed, not modelled.
NOT_MODELLED_0_5_23 = {
    "_radix_eviction_policy_explicitly_set", "_speculative_draft_quantization_explicitly_set",
    "_swa_full_tokens_ratio_explicitly_set", "aux_hidden_state_capture", "custom_sigquit_handler",
    "enable_cp_tp_group_sharing", "grpc_worker_threads", "speculative_boundary_reduction", "stat_loggers",
    "uses_mamba_radix_cache", "watermark_context_window", "watermark_default_enabled", "watermark_enforce_all",
    "watermark_key", "watermark_key_b", "watermark_max_probability", "watermark_mixing_probability"}


def test_the_simulator_as_0_5_23_answers_server_info_as_the_real_server_did(sim):
    """The capture of the real 0.5.23 on lab host cpu1 (CPU, torch_native, the tiny Llama) against the
    simulator started with the same flags."""
    s = sim("0.5.23", ["--device", "cpu", "--attention-backend", "torch_native", "--disable-cuda-graph",
                       "--max-total-tokens", "8192", "--enable-metrics"], model=TINY_LLAMA, weight_bytes=216_000)
    s.wait_healthy()
    info = s.json("/server_info")
    assert set(REAL_0_5_23) - set(info) == NOT_MODELLED_0_5_23
    assert set(info) - set(REAL_0_5_23) == {"config"}    # the parser's --config file option, not a ServerArgs field
    for key in ("version", "status", "max_total_num_tokens", "max_req_input_len", "frontend", "kv_events",
                "context_length", "cuda_graph_backend_prefill", "cuda_graph_backend_decode", "disable_cuda_graph",
                "max_total_tokens", "device", "attention_backend", "tp_size", "api_key"):
        assert info[key] == REAL_0_5_23[key], key
    for phase in ("decode", "prefill"):
        assert info["cuda_graph_config"][phase]["backend"] == REAL_0_5_23["cuda_graph_config"][phase]["backend"]


# /server_info values the real 0.5.23 resolves at start-up where its parser's default is None, and
# the simulator (the parser's defaults, then its own table of resolutions) leaves None. Each is
# known and not modelled; the paths are under the 0.5.23 wheel's sglang/srt/arg_groups/.
START_UP_RESOLUTION = "resolved at start-up by a ServerArgs hook (the parser's default is None)"
FALLBACK = "an Arg(resolvable=True, fallback=...) field, the fallback applied when no rule sets it"
KNOWN_VALUE_DIFFERENCES_0_5_23 = {
    # from the device: a CPU host's values
    "chunked_prefill_size": f"{START_UP_RESOLUTION}: 4096 here, sized from the device (fields/schedule.py:52)",
    "page_size": f"{START_UP_RESOLUTION}: 1 (fields/schedule.py:143)",
    "sampling_backend": f"{START_UP_RESOLUTION}: pytorch on the CPU (validation_hook.py:478)",
    "dcp_comm_backend": f"{START_UP_RESOLUTION}: ag_rs off CUDA/ROCm/XPU (fields/parallel.py:127)",
    "mm_feature_transport": f"{START_UP_RESOLUTION}: cpu (fields/mm.py:144)",
    # plain values a hook fills in
    "grammar_backend": f"{START_UP_RESOLUTION}: xgrammar (fields/exec_.py:266)",
    "hicache_ratio": f"{START_UP_RESOLUTION}: 2.0 (fields/memory.py:109)",
    "expert_distribution_recorder_buffer_size": f"{START_UP_RESOLUTION}: 1000 (fields/exec_.py:939)",
    "prefill_decode_interval": f"{START_UP_RESOLUTION}: 0 (fields/schedule.py:56)",
    "speculative_moe_runner_backend": f"{START_UP_RESOLUTION}: auto (fields/spec.py:173)",
    "enable_tp_lm_head_all_to_all": f"{START_UP_RESOLUTION}: False (fields/parallel.py:206)",
    "custom_weight_loader": f"{START_UP_RESOLUTION}: [] (fields/model.py:292)",
    "mm_process_config": f"{START_UP_RESOLUTION}: {{}} (fields/mm.py:69)",
    "enable_tf32_matmul": f"{FALLBACK}: False (fields/exec_.py:45)",
    "mm_enable_dp_encoder": f"{FALLBACK}: False (fields/mm.py:60)",
    "swa_full_tokens_ratio": f"{FALLBACK}: 0.8 (fields/schedule.py:150)",
    "mamba_full_memory_ratio": f"{FALLBACK}: 0.9 (fields/schedule.py:220)",
    "random_seed": "drawn at random when not given (fields/device.py:47): no value to match",
    "watermark_config": "printed as '<redacted>' by the real server; None in the simulator (no watermark)",
}


def test_the_simulator_as_0_5_23_reports_server_info_values_of_the_real_types(sim):
    """Every /server_info key both answer has a value of the same JSON type, except the start-up
    resolutions listed (and why) in KNOWN_VALUE_DIFFERENCES_0_5_23: a new difference fails here."""
    s = sim("0.5.23", ["--device", "cpu", "--attention-backend", "torch_native", "--disable-cuda-graph",
                       "--max-total-tokens", "8192", "--enable-metrics"], model=TINY_LLAMA, weight_bytes=216_000)
    s.wait_healthy()
    info = s.json("/server_info")
    differ = {key: (type(REAL_0_5_23[key]).__name__, type(info[key]).__name__)
              for key in set(REAL_0_5_23) & set(info) if type(REAL_0_5_23[key]) is not type(info[key])}
    assert sorted(differ) == sorted(KNOWN_VALUE_DIFFERENCES_0_5_23), differ
    assert all(sim_type == "NoneType" for _, sim_type in differ.values()), differ


PROBE = pathlib.Path(__file__).resolve().parents[2] / "lab" / "real_sglang" / "probe.py"
REAL_PROBES_0_5_23 = json.loads((pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "real_sglang"
                                 / "0.5.23-cpu-probes.json").read_text())


def shape_differences(where, real, sim):
    """Where two shapes (lab/real_sglang/probe.py `shape`) differ: missing or extra keys, other types."""
    if isinstance(real, dict) and isinstance(sim, dict):
        out = [f"{where}.{k}: only in the real server" for k in sorted(set(real) - set(sim))]
        out += [f"{where}.{k}: only in the simulator" for k in sorted(set(sim) - set(real))]
        for key in sorted(set(real) & set(sim)):
            out += shape_differences(f"{where}.{key}", real[key], sim[key])
        return out
    if isinstance(real, list) and isinstance(sim, list):
        return shape_differences(f"{where}[]", real[0] if real else None, sim[0] if sim else None)
    return [] if real == sim else [f"{where}: {real} on the real server, {sim} in the simulator"]


def probe_differences(real, sim):
    out = []
    for name in sorted(real):
        if name == "GET /metrics":
            families = real[name]["families"]
            out += [f"{name} {family}: {spec} in the simulator, {families.get(family)} on the real server"
                    for family, spec in sim[name]["families"].items() if families.get(family) != spec]
        elif name == "GET /server_info":
            continue     # its keys and values: test_the_simulator_as_0_5_23_answers_server_info_as_the_real_server_did
        else:
            out += shape_differences(name, real[name], sim[name])
    return out


# What the simulator still answers differently from the real 0.5.23, each with why: /generate's
# meta_info carries the real scheduler's per-request timing and bookkeeping, which the simulator does
# not have and the project does not read (it reads prompt_tokens, completion_tokens, finish_reason).
GENERATE_ONLY_REAL = ("cached_tokens_details", "dp_rank", "forward_entry_time", "num_retractions",
                      "prefill_finished_time", "queue_time", "reasoning_tokens", "response_sent_to_client_ts",
                      "storage_prefetch_wait", "storage_staging_wait", "weight_version")
KNOWN_PROBE_DIFFERENCES_0_5_23 = sorted(
    [f"POST /generate.body.meta_info.{k}: only in the real server" for k in GENERATE_ONLY_REAL + (
        "api_server_dispatch_finish_ts", "decode_throughput", "first_token_latency", "request_finished_ts",
        "request_received_ts", "weight_versions")]
    + [f"POST /generate stream.chunk_shapes[].meta_info.{k}: only in the real server" for k in GENERATE_ONLY_REAL])


def test_the_simulator_as_0_5_23_answers_the_probes_as_the_real_server_did(sim):
    """lab/real_sglang/probe.py against the simulator, compared with what the real 0.5.23 answered on lab
    host cpu1 (its capture; tests/lab/test_real_sglang_lab.py checks the capture against the live server):
    status codes, JSON shapes, stream chunks, usage, finish reasons, errors (bad JSON, an unknown model,
    a request longer than the context, a missing or wrong key) and the /metrics families the simulator
    writes, with their types and label names."""
    s = sim("0.5.23", ["--device", "cpu", "--attention-backend", "torch_native", "--max-total-tokens", "8192",
                       "--enable-metrics", "--api-key", "probe-key"], model=TINY_LLAMA, weight_bytes=216_000)
    s.wait_listening()
    deadline = time.monotonic() + 20
    while s.get("/health")[0] != 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    out = subprocess.run([sys.executable, str(PROBE), "--base-url", s.url, "--api-key", "probe-key",
                          "--model", str(s.model)], capture_output=True, text=True, check=True)
    probes = json.loads(out.stdout)
    assert sorted(probes) == sorted(REAL_PROBES_0_5_23)
    assert sorted(probe_differences(REAL_PROBES_0_5_23, probes)) == KNOWN_PROBE_DIFFERENCES_0_5_23
    # the metrics the project reads are among the real server's families
    assert set(probes["GET /metrics"]["families"]) < set(REAL_PROBES_0_5_23["GET /metrics"]["families"])

