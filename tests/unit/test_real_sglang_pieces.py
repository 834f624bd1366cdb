"""The pieces of the real-SGLang lab host (lab/real_sglang) and the readers of what it answered.

The real server's `/server_info` (tests/fixtures/real_sglang/0.5.23-cpu-server_info.json) was
captured from lab host cpu1: SGLang 0.5.23 on this machine's CPU, torch_native attention, the tiny
model below; `api_key` was unset for the capture.
"""
import json
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.source.optimisations import BY_KEY

REPO = pathlib.Path(__file__).resolve().parents[2]
REAL = REPO / "lab" / "real_sglang"
SERVER_INFO = json.loads((REPO / "tests" / "fixtures" / "real_sglang" / "0.5.23-cpu-server_info.json").read_text())


@pytest.fixture
def standin(monkeypatch):
    # imported as SGLang imports it: `sgl_kernel` from the folder the service's PYTHONPATH names
    monkeypatch.syspath_prepend(str(REAL))
    monkeypatch.delitem(sys.modules, "sgl_kernel", raising=False)
    import sgl_kernel
    assert sgl_kernel.LAB_STANDIN is True and pathlib.Path(sgl_kernel.__file__).parent.parent == REAL
    yield sgl_kernel
    sys.modules.pop("sgl_kernel", None)


def test_the_standin_writes_each_requests_slots_in_order(standin):
    table = np.zeros((3, 8), dtype=np.int64)
    # request 2 gets tokens 1..2 of its row, request 0 tokens 4..6: the next 2, then 3 entries of out_cache_loc
    standin.assign_req_to_token_pool_cpu(np.array([2, 0]), table, np.array([1, 4]), np.array([3, 7]),
                                         np.array([11, 12, 21, 22, 23]), 8)
    assert table.tolist() == [[0, 0, 0, 0, 21, 22, 23, 0], [0] * 8, [0, 11, 12, 0, 0, 0, 0, 0]]


def test_any_other_kernel_imports_but_refuses_when_called_naming_itself(standin):
    kernel = standin.copy_all_layer_kv_cache_cpu        # SGLang imports it at start-up
    with pytest.raises(NotImplementedError, match=r"sgl_kernel\.copy_all_layer_kv_cache_cpu is not in sglang-fleet's "
                                                  r"lab stand-in"):
        kernel(1, 2)
    with pytest.raises(AttributeError):
        standin.__wrapped__    # noqa: B018 - dunder lookups stay honest (no fake module attributes)


def write_model(dest, seed=0):
    subprocess.run([sys.executable, str(REAL / "make_tiny_model.py"), str(dest), "--seed", str(seed)], check=True)
    return {p.name: p.read_bytes() for p in dest.iterdir()}


def test_the_tiny_model_is_the_same_bytes_for_the_same_seed(tmp_path):
    first, again, other = (write_model(tmp_path / "a"), write_model(tmp_path / "b"),
                           write_model(tmp_path / "c", seed=1))
    assert first == again
    assert first["model.safetensors"] != other["model.safetensors"] and first["tokenizer.json"] == other["tokenizer.json"]
    assert sorted(first) == ["config.json", "generation_config.json", "model.safetensors", "special_tokens_map.json",
                             "tokenizer.json", "tokenizer_config.json"]


def test_the_tiny_models_tensors_fit_its_config_as_safetensors_lays_them_out(tmp_path):
    files = write_model(tmp_path)
    config = json.loads(files["config.json"])
    blob = files["model.safetensors"]
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + size])
    assert size % 8 == 0 and header.pop("__metadata__") == {"format": "pt"}
    hidden, vocab = config["hidden_size"], config["vocab_size"]
    assert header["model.embed_tokens.weight"]["shape"] == header["lm_head.weight"]["shape"] == [vocab, hidden]
    kv = config["num_key_value_heads"] * config["head_dim"]
    assert header["model.layers.1.self_attn.k_proj.weight"]["shape"] == [kv, hidden]
    assert len([k for k in header if k.startswith("model.layers.")]) == 9 * config["num_hidden_layers"]
    # contiguous data, 2 bytes per bf16 value, ending at the end of the file
    spans = sorted(t["data_offsets"] for t in header.values())
    assert spans[0][0] == 0 and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert spans[-1][1] == len(blob) - 8 - size
    for tensor in header.values():
        count = 1
        for dim in tensor["shape"]:
            count *= dim
        assert tensor["dtype"] == "BF16" and tensor["data_offsets"][1] - tensor["data_offsets"][0] == 2 * count


def test_the_tiny_tokenizer_has_every_byte_and_the_special_tokens_once(tmp_path):
    files = write_model(tmp_path)
    tokenizer, config = json.loads(files["tokenizer.json"]), json.loads(files["config.json"])
    vocab = tokenizer["model"]["vocab"]
    assert sorted(vocab.values()) == list(range(config["vocab_size"]))
    assert {t["content"]: t["id"] for t in tokenizer["added_tokens"]} == \
        {"<s>": config["bos_token_id"], "</s>": config["eos_token_id"], "<unk>": 258, "<pad>": config["pad_token_id"]}


# --- what the real server answered, read as the audit reads it --------------------------------------------------

def test_the_real_server_resolves_the_graphs_in_cuda_graph_config_not_in_the_flags():
    # the per-phase flags stay as given (unset), the resolution is in cuda_graph_config
    assert (SERVER_INFO["cuda_graph_backend_prefill"], SERVER_INFO["cuda_graph_backend_decode"]) == (None, None)
    assert BY_KEY["piecewise_cuda_graph"].read(SERVER_INFO) == (False, "cuda_graph_config.prefill.backend=disabled")
    assert BY_KEY["cuda_graph"].read(SERVER_INFO) == (False, "cuda_graph_config.decode.backend=disabled")


def test_custom_all_reduce_on_one_rank_is_read_as_off():
    assert SERVER_INFO["tp_size"] == 1 and SERVER_INFO["disable_custom_all_reduce"] is False
    assert BY_KEY["custom_all_reduce"].read(SERVER_INFO) == (False, "tp_size=1")
    assert BY_KEY["custom_all_reduce"].read({**SERVER_INFO, "tp_size": 2}) == (True, "disable_custom_all_reduce=false")


def test_every_server_field_the_audit_reads_is_in_the_real_answer():
    missing = sorted({field for spec in BY_KEY.values() for field in spec.server_fields} - set(SERVER_INFO))
    # fields of older layouts only (0.5.13 and before); 0.5.23 answers every other one
    assert missing == ["disable_piecewise_cuda_graph", "enable_piecewise_cuda_graph", "enforce_piecewise_cuda_graph"]
