"""predict() (sglang-fleet's static reader) against SGLang's own resolution (the oracle).

The fixtures in tests/fixtures/oracle/<release>/<profile>.json were made by
scripts/sglang_oracle.py, which runs the release's real ``ServerArgs`` resolution (real
wheel, real ``__post_init__`` / arg_groups pipeline, GPU facts and config.json patched in)
and shares no code with plugins/module_utils/source/. Each audited optimisation that
predict() reports must have the value SGLang itself resolves.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "oracle"

pytestmark = pytest.mark.wheels


def _load(name, path):
    kw = {"submodule_search_locations": [str(path.parent)]} if path.name == "__init__.py" else {}
    spec = importlib.util.spec_from_file_location(name, path, **kw)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


oracle = _load("_sglang_oracle", REPO / "scripts" / "sglang_oracle.py")
sgs = _load("_sglang_source", REPO / "plugins" / "module_utils" / "source" / "__init__.py")
wheels = _load("_wheels", REPO / "tests" / "wheels.py")

CASES = sorted((p.parent.name, p.stem) for p in FIXTURES.glob("*/*.json"))

# Known defects of predict(), found by this test (release, profile, key) -> why.
KNOWN = {}


def fixture(release, profile) -> dict:
    return json.loads((FIXTURES / release / f"{profile}.json").read_text())


def oracle_view(res: dict) -> dict:
    """The audited optimisations as SGLang resolved them (fields -> one value per key)."""
    out = {}
    if "cuda_graph_config.prefill.backend" in res:          # eras B/C: per-phase backends
        out["prefill graph"] = res["cuda_graph_config.prefill.backend"]
        out["decode graph"] = res["cuda_graph_config.decode.backend"] != "disabled"
    else:                                                   # era A
        if "disable_piecewise_cuda_graph" in res:
            out["prefill graph"] = not res["disable_piecewise_cuda_graph"]
        elif "enable_piecewise_cuda_graph" in res:
            out["prefill graph"] = bool(res["enable_piecewise_cuda_graph"])
        out["decode graph"] = not res["disable_cuda_graph"]
    if int(res.get("tp_size") or 1) > 1:
        out["custom all-reduce"] = not res["disable_custom_all_reduce"]
    out["fusion"] = bool(res.get("enable_flashinfer_allreduce_fusion")) or \
        res.get("flashinfer_allreduce_fusion_backend") is not None
    out["single-batch overlap"] = bool(res.get("enable_single_batch_overlap"))
    out["two-batch overlap"] = bool(res.get("enable_two_batch_overlap"))
    out["speculative"] = None if not res.get("speculative_algorithm") else {
        "algorithm": res["speculative_algorithm"], "num_steps": res["speculative_num_steps"],
        "eagle_topk": res["speculative_eagle_topk"],
        "num_draft_tokens": res["speculative_num_draft_tokens"]}
    out["mem_fraction_static"] = res.get("mem_fraction_static")
    return out


def predicted_view(findings, tp: int) -> dict:
    f = {x.name: x for x in findings}
    out = {"prefill graph": f["prefill/piecewise CUDA graph"].value,
           "decode graph": bool(f["decode CUDA graph"].value),
           "fusion": bool(f["FlashInfer all-reduce fusion"].value),
           "single-batch overlap": bool(f["single-batch overlap"].value),
           "two-batch overlap": bool(f["two-batch overlap"].value),
           "speculative": f["speculative decoding"].value,
           "mem_fraction_static": f["mem_fraction_static"].value}
    if tp > 1:
        out["custom all-reduce"] = bool(f["custom all-reduce"].value)
    return out


@functools.cache
def source(release):
    return sgs.load_source(wheels.sglang_source_tree(release))


def predict_for(release, profile):
    prof = oracle.PROFILES[profile]
    src = source(release)
    argv = ["--model-path", f"/models/{prof['model']}"] + prof["argv"]
    args = sgs.normalise_argv(src, argv)
    gpu = oracle.GPUS[prof["gpu_model"]]
    hardware = {"gpu_model": prof["gpu_model"], "gpu_count": prof["gpu_count"],
                "compute_capability": gpu["cc"], "source": "declared"}
    return src, argv, sgs.predict(src, args, hardware, json.loads(json.dumps(prof["config"])))


def _cases_with(keys):
    out = []
    for release, profile in CASES:
        if not fixture(release, profile).get("resolved"):
            continue
        tp = int(fixture(release, profile)["resolved"].get("tp_size") or 1)
        for key in keys:
            if key == "custom all-reduce" and tp == 1:
                continue   # no tensor-parallel all-reduce at tp_size 1
            why = KNOWN.get((release, profile, key))
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
            out.append(pytest.param(release, profile, key, marks=marks,
                                    id=f"{release}-{profile}-{key}"))
    return out


KEYS = ("prefill graph", "decode graph", "custom all-reduce", "fusion", "single-batch overlap",
        "two-batch overlap", "speculative", "mem_fraction_static")


@pytest.mark.parametrize(("release", "profile", "key"), _cases_with(KEYS))
def test_predict_matches_oracle(release, profile, key):
    want = oracle_view(fixture(release, profile)["resolved"])
    _src, _argv, findings = predict_for(release, profile)
    got = predicted_view(findings, int(fixture(release, profile)["resolved"].get("tp_size") or 1))
    if key == "mem_fraction_static" and got[key] == "auto":
        assert want[key] is not None   # chosen at start-up: SGLang must have chosen one
        return
    assert got[key] == want[key], (
        f"sglang {release}, profile {profile}, {key}: predict() says {got[key]!r}, "
        f"SGLang's own resolution gives {want[key]!r}")


STARTUP_ERRORS = [(r, p) for r, p in CASES if fixture(r, p).get("startup_error")]


def refusals_for(release, profile):
    """validate_argv's errors for the profile's argv, with its model's config and GPUs."""
    prof = oracle.PROFILES[profile]
    src = source(release)
    argv = ["--model-path", f"/models/{prof['model']}"] + prof["argv"]
    hardware = {"gpu_model": prof["gpu_model"], "gpu_count": prof["gpu_count"]}
    config = json.loads(json.dumps(prof["config"]))
    return [p for p in sgs.validate_argv(src, argv, config, hardware) if p.severity == "error"]


@pytest.mark.parametrize(("release", "profile"), STARTUP_ERRORS)
def test_reader_reports_what_sglang_refuses_at_startup(release, profile):
    """SGLang's own resolution raised (the fixture's startup_error): validation must refuse the
    argv first, at the same source line, with SGLang's message and a fix that SGLang accepts."""
    err = fixture(release, profile)["startup_error"]
    problems = refusals_for(release, profile)
    assert [p.kind for p in problems] == ["refused_at_start"], problems
    msg = problems[0].message
    # the oracle's traceback line is the `raise ValueError(` statement in the release
    assert f"sglang/{err['file']}:{err['line']} " in msg, (msg, err)
    assert f"{err['type']}: {err['message']}" in msg
    assert "Fix: add disable_radix_cache: true to sglang_args" in msg
    # the fix: the oracle resolves the same argv with --disable-radix-cache without an error
    fixed = fixture(release, f"{profile}-no-radix")
    assert fixed["argv"] == fixture(release, profile)["argv"] + ["--disable-radix-cache"]
    assert not fixed.get("startup_error") and fixed.get("resolved")


@pytest.mark.parametrize("release", sorted({r for r, _ in STARTUP_ERRORS}))
def test_the_other_suggested_fix_starts_in_sglang(release, monkeypatch):
    """The message's second fix (--mamba-scheduler-strategy extra_buffer) run live through the
    oracle: SGLang's own resolution accepts it, and so does validation."""
    (problem,) = refusals_for(release, "ct129")
    assert problem.suggestion == ["--disable-radix-cache", "--mamba-scheduler-strategy extra_buffer"]
    profile = dict(oracle.PROFILES["ct129"])
    profile["argv"] = profile["argv"] + problem.suggestion[1].split()
    monkeypatch.setitem(oracle.PROFILES, "ct129-extra-buffer", profile)
    live = oracle.resolve(release, "ct129-extra-buffer")
    assert live.get("error") is None, live.get("stderr_tail")
    assert live.get("startup_error") is None and live["resolved"]
    assert refusals_for(release, "ct129-extra-buffer") == []


@pytest.mark.parametrize(("release", "profile"), [
    (r, p) for r, p in CASES if not fixture(r, p).get("startup_error")])
def test_reader_refuses_nothing_sglang_starts_with(release, profile):
    """SGLang's own resolution went through: validation must not refuse the argv."""
    assert refusals_for(release, profile) == []


def test_fixture_matrix_covers_three_layouts():
    eras = {}
    for release, _profile in CASES:
        era = source(release).era
        eras.setdefault(era, set()).add(release)
    assert set(eras) == {"A", "B", "C"}, eras
    assert len({r for r, _ in CASES}) >= 6 and len({p for _, p in CASES}) >= 5


def test_live_oracle_matches_its_fixture():
    """Re-run the oracle for one release x profile: the fixtures cannot rot silently."""
    release, profile = "0.5.18", "h200x2-moe"
    live = oracle.fixture_record(release, profile)
    stored = fixture(release, profile)
    assert live.get("error") is None, live.get("stderr_tail")
    assert live["resolved"] == stored["resolved"]
