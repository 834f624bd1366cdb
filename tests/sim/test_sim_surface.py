"""The simulator's response surface (lab/sglang_sim/README.md "Response surface"): each test writes its own
surface into the config file and checks that the simulator follows it; the last ones check the defaults."""
from __future__ import annotations

import concurrent.futures
import importlib.util
import pathlib
import re

import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.verify import bench_client
from tests.sim.test_sim import LLAMA, MTP1_ARGV, SIM, Sim, decode_rate, run_to_exit

pytestmark = pytest.mark.wheels

REPO = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("sglang_sim_module", SIM)
simmod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(simmod)

FAST = 5_400_000_000          # weight bytes: ~5x the lab's ct129 pace, so a stream takes a fraction of a second
# steps 3 is the optimum of this surface: 2 and 4 are ~3.7 % slower, 1 and 5 more (surface_rates below)
PEAK_AT_3 = {"speculative": {"accept_first": 0.99, "accept_decay": 0.7, "draft_step_cost": 0.1}}


@pytest.fixture
def sim(tmp_path):
    started = []

    def start(version, argv, **kw):
        started.append(Sim(tmp_path / f"host{len(started)}", version, argv, **kw))
        return started[-1]
    yield start
    for s in started:
        s.stop()


def spec_argv(steps: int) -> list:
    return ["--tp", "2", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", str(steps),
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(steps + 1),
            "--disable-radix-cache"]


def stream_rate(s, tokens=120) -> float:
    s.wait_healthy()
    return decode_rate(s.stream("/v1/completions", {"prompt": "go", "max_tokens": tokens, "stream": True}))


def surface_rates(spec: dict) -> list:
    """Single-stream speed by steps 1..7 (steps + 1 draft tokens) of a speculative surface, relative."""
    full = {**simmod.SURFACE_DEFAULTS["speculative"], **spec}
    return [simmod.accept_length(d, 1, d + 1, full) / (1 + full["draft_step_cost"] * d) for d in range(1, 8)]


def test_a_surface_with_its_optimum_at_3_steps_decodes_fastest_at_3(sim):
    rates = surface_rates(PEAK_AT_3["speculative"])
    assert max(range(7), key=rates.__getitem__) == 2 and rates[2] / max(rates[1], rates[3]) > 1.03
    servers = {steps: sim("0.5.23", spec_argv(steps), config={"surface": PEAK_AT_3}, weight_bytes=FAST)
               for steps in range(1, 6)}
    measured = {steps: stream_rate(s) for steps, s in servers.items()}
    assert max(measured, key=measured.get) == 3, measured


@pytest.mark.parametrize(("version", "line"), [("0.5.11", 44), ("0.5.23", 99)])
def test_a_static_pool_smaller_than_the_weights_fails_as_sglang_does(sim, version, line):
    """mem_fraction_static 0.2 of a 48 GB A6000 cannot hold half of 27 GB: SGLang's MemoryPoolConfig raises."""
    rc, err = run_to_exit(sim(version, MTP1_ARGV + ["--mem-fraction-static", "0.2"]))
    assert rc == -9, err   # the launcher kills its process tree, itself with SIGKILL
    assert f'pool_configurator.py", line {line}, in __post_init__' in err
    assert ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: mem_fraction_static=0.2") in err
    assert err.rstrip().endswith("Received sigquit from a child process. It usually means the child failed.")


@pytest.mark.parametrize(("version", "hint"), [("0.5.11", "2. set --cuda-graph-max-bs to a smaller value"),
                                               ("0.5.23", "2. set --cuda-graph-max-bs-decode to a smaller value")])
def test_a_static_pool_that_leaves_too_little_fails_with_a_cuda_oom_at_graph_capture(sim, version, hint):
    """0.97 leaves 1.4 GB of 48 for activations and graphs; SGLang's own estimate, times 0.4, needs ~4.3 GB."""
    rc, err = run_to_exit(sim(version, MTP1_ARGV + ["--mem-fraction-static", "0.97"]))
    assert rc == -9, err
    assert "Scheduler hit an exception: Traceback (most recent call last):" in err
    assert "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate" in err
    assert hint in err


def test_a_limit_of_the_surface_fails_past_its_value_and_starts_at_it(sim):
    surface = {"limits": [{"setting": "cuda_graph_max_bs", "above": 64, "fails": "cuda_oom"}]}
    rc, err = run_to_exit(sim("0.5.11", ["--tp", "2", "--cuda-graph-max-bs", "128"], config={"surface": surface}))
    assert rc == -9 and "Capture cuda graph failed: CUDA out of memory" in err, err
    ok = sim("0.5.11", ["--tp", "2", "--cuda-graph-max-bs", "64"], config={"surface": surface})
    ok.wait_healthy()


def test_acceptance_fades_with_batch_size_as_configured(sim):
    """batch_fade_per_doubling 0.5: at batch 4 the gain over 1 token is halved (1 + 0.5 * log2 4 = 2)."""
    surface = {"speculative": {"batch_fade_per_doubling": 0.5}}
    s = sim("0.5.23", spec_argv(3), config={"surface": surface}, weight_bytes=FAST)
    # the faster of two: a loaded machine only ever slows the simulator's pacing (once 26 % slow in CI)
    single = max(stream_rate(s, 80), stream_rate(s, 80))
    body = {"text": "go", "stream": True, "sampling_params": {"max_new_tokens": 80}}
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda _: s.stream("/generate", body), range(4)))
    accept = simmod.accept_length(3, 1, 4, simmod.SURFACE_DEFAULTS["speculative"])
    faded = 1 + (accept - 1) / 2
    lengths = [events[-2][1]["meta_info"]["spec_accept_length"] for events in runs]
    assert all(abs(x - faded) < 0.2 for x in lengths), (lengths, faded)   # the streams overlap almost wholly
    times = [[t for t, e in events[:-1]] for events in runs]
    rates = [(len(t) - 2) / (t[-2] - t[0]) for t in times]
    expected = single * faded / accept / (1 + simmod.SURFACE_DEFAULTS["batch_cost_per_doubling"] * 2)
    assert all(abs(r / expected - 1) < 0.08 for r in rates), (rates, expected)


def test_an_effect_applies_to_the_model_class_it_names(sim):
    """Forcing piecewise CUDA graphs on a model SGLang calls multimodal: +10 % decode here; a text model: none."""
    surface = {"effects": [{"setting": "enforce_piecewise_cuda_graph", "equals": True, "multimodal": True,
                            "decode": 1.1}]}
    base = stream_rate(sim("0.5.11", MTP1_ARGV, config={"surface": surface}, weight_bytes=FAST))
    forced = stream_rate(sim("0.5.11", MTP1_ARGV + ["--enforce-piecewise-cuda-graph"],
                             config={"surface": surface}, weight_bytes=FAST))
    assert 1.06 < forced / base < 1.14, (base, forced)
    text = sim("0.5.11", ["--tp", "2", "--enforce-piecewise-cuda-graph"], model=LLAMA,
               config={"surface": surface}, weight_bytes=FAST)
    text_base = sim("0.5.11", ["--tp", "2"], model=LLAMA, config={"surface": surface}, weight_bytes=FAST)
    assert 0.95 < stream_rate(text) / stream_rate(text_base) < 1.05


def test_max_running_requests_queues_the_rest(sim):
    s = sim("0.5.23", ["--tp", "2", "--max-running-requests", "1"], weight_bytes=FAST)
    s.wait_healthy()
    body = {"text": "go", "sampling_params": {"max_new_tokens": 60}}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        outs = list(pool.map(lambda _: s.json("/generate", body), range(2)))
    e2e = sorted(o["meta_info"]["e2e_latency"] for o in outs)
    assert e2e[1] > 1.8 * e2e[0], e2e   # the second waited for the first


@pytest.mark.parametrize(("surface", "error"), [
    ({"speed": 2}, "surface.speed is not a key of the surface"),
    ({"speculative": {"acceptance": 0.8}}, "surface.speculative has unknown keys ['acceptance']"),
    ({"limits": [{"setting": "cuda_graph_max_bs", "above": 8}]}, "needs fails: one of cuda_oom"),
])
def test_a_surface_it_does_not_know_exits_1_naming_it(sim, surface, error):
    rc, err = run_to_exit(sim("0.5.23", ["--tp", "2"], config={"surface": surface}))
    assert rc == 1 and error in err, err


# ----------------------------------------------------------------------------- the defaults


def test_the_default_surface_peaks_at_3_to_4_steps_not_7():
    rates = surface_rates({})
    best = max(range(7), key=rates.__getitem__) + 1
    assert best in (3, 4), rates
    assert rates[6] < rates[2], rates   # 7 steps slower than 3


def lab_floor(host: str) -> float:
    text = (REPO / "inventories" / "lab" / "host_vars" / f"{host}.yml").read_text()
    return float(re.search(r"^sglang_verify_min_decode_tok_s:\s*([\d.]+)", text, re.M).group(1))


@pytest.mark.parametrize(("host", "version", "argv", "weights", "hw", "model"), [
    ("ct129", "0.5.11", spec_argv(3) + ["--mem-fraction-static", "0.88"], 27_000_000_000, None, None),
    ("h200x1", "0.5.23", ["--tp", "1"], 16_400_000_000,
     {"gpu_model": "NVIDIA H200", "gpu_count": 1, "compute_capability": "9.0", "hbm_bandwidth_gbs": 4800}, LLAMA),
    ("h200x2", "0.5.18", ["--tp", "2", "--mem-fraction-static", "0.85"], 65_500_000_000,
     {"gpu_model": "NVIDIA H200", "gpu_count": 2, "compute_capability": "9.0", "hbm_bandwidth_gbs": 4800}, LLAMA),
])
def test_the_lab_hosts_verify_floors_hold_with_the_default_surface(sim, host, version, argv, weights, hw, model):
    """Each lab host's flags, as its host_vars give them, decode above its verify floor with >= 5 % to spare."""
    kw = {"model": model} if model else {}
    s = sim(version, argv, config=hw, weight_bytes=weights, **kw)
    rate = stream_rate(s, 60)
    assert rate > 1.05 * lab_floor(host), (host, rate, lab_floor(host))


def test_a_setting_declared_to_change_outputs_changes_the_greedy_text_and_nothing_else(sim):
    """tune.yml's output check needs a double that can change what the model says: an effect with
    `outputs: changed` (README "Response surface"); the real engine's numbers are not claimed. The
    client is the one tune.yml runs (bench_client.greedy_outputs), with the latency the limits read."""
    surface = {"effects": [{"setting": "kv_cache_dtype", "equals": "fp8_e5m2", "outputs": "changed"}]}
    plain = sim("0.5.23", MTP1_ARGV, config={"surface": surface}, weight_bytes=FAST)
    fp8 = sim("0.5.23", MTP1_ARGV + ["--kv-cache-dtype", "fp8_e5m2"], config={"surface": surface}, weight_bytes=FAST)
    for s in (plain, fp8):
        s.wait_healthy()
    ref = bench_client.greedy_outputs(plain.url, "completions", None, 3, 8)
    assert ref == ["ABCDEFGH"] * 3 and bench_client.greedy_outputs(plain.url, "generate", None, 3, 8) == ref
    assert bench_client.greedy_outputs(fp8.url, "completions", None, 3, 8) == ["ABCdefgh"] * 3
    res = bench_client.run_benchmark(fp8.url, "completions", None, 16, 8, concurrency=2, num_prompts=4, warmup=1,
                                     repeats=2)
    pooled = res["latency_ms"]
    assert (pooled["ttft"]["n"], pooled["e2e"]["n"], pooled["itl"]["n"]) == (8, 8, 8 * 7), pooled
    assert 0 < pooled["ttft"]["p50"] <= pooled["ttft"]["p99"] <= pooled["e2e"]["p50"], pooled


def test_outputs_is_an_effects_key_with_one_value(tmp_path):
    with pytest.raises(simmod.SimError, match="outputs is an effect's key and its one value is 'changed'"):
        simmod.load_surface({"effects": [{"setting": "dtype", "equals": "float32", "outputs": "different"}]})
    with pytest.raises(simmod.SimError, match="outputs is an effect's key"):
        simmod.load_surface({"limits": [{"setting": "dtype", "equals": "float32", "fails": "crash", "outputs": "changed"}]})
