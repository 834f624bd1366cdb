"""Where SGLang knowledge lives: the layout registry (plugins/module_utils/source/layouts/) and the
registry of audited optimisations (plugins/module_utils/source/optimisations.py).

A new flag layout is one module under layouts/ plus one entry of LAYOUTS; a new audited
optimisation is one entry of OPTIMISATIONS plus its predictor in predict.py (CONTRIBUTING.md).
"""
import importlib
import json

import pytest
from wheels import sglang_source_tree

from ansible_collections.sglang.fleet.plugins.module_utils.source import (
    UnknownLayout,
    layouts,
    load_source,
    normalise_argv,
    predict,
)
from ansible_collections.sglang.fleet.plugins.module_utils.source.extract import Extractor, callee, is_dataclass
from ansible_collections.sglang.fleet.plugins.module_utils.source.layouts.base import Layout, add_cli_args, calls_in
from ansible_collections.sglang.fleet.plugins.module_utils.source.optimisations import (
    BY_LABEL,
    EXPECT_KEYS,
    OPTIMISATIONS,
    SERVER_FIELDS,
    SETTINGS,
    STATUSES,
    Status,
)
from ansible_collections.sglang.fleet.plugins.module_utils.source.tree import Tree

predict_module = importlib.import_module("ansible_collections.sglang.fleet.plugins.module_utils.source.predict")  # the package's predict is the function

# One release of each layout, oldest layout first.
RELEASE_OF_LAYOUT = {"A": "0.5.11", "B": "0.5.18", "C": "0.5.23"}


def _plain_class_tree(tmp_path):
    """server_args.py laid out like layout A but with a plain (not @dataclass) ServerArgs."""
    flags = "".join(f'        parser.add_argument("--opt-{i}", type=int, default=ServerArgs.x)\n' for i in range(60))
    pkg = tmp_path / "sglang"
    (pkg / "srt").mkdir(parents=True)
    (pkg / "version.py").write_text('__version__ = "9.9.9"\n')
    (pkg / "srt" / "server_args.py").write_text(
        "class ServerArgs:\n    x: int = 7\n\n    @staticmethod\n    def add_cli_args(parser):\n"
        '        parser.add_argument("--tp-size", type=int, default=1)\n' + flags)
    return pkg


class PlainClass(Layout):
    """A made-up layout D: add_argument calls on a ServerArgs that is not a dataclass."""

    name = "D"
    releases = "none (test)"

    def detect(self, ex) -> bool:
        add = add_cli_args(ex)
        return add is not None and any(callee(c) == "add_argument" for c in calls_in(add)) \
            and not is_dataclass(ex.sa.classes["ServerArgs"])


def test_a_new_layout_is_one_module_and_one_layouts_entry(tmp_path, monkeypatch):
    pkg = _plain_class_tree(tmp_path)
    with pytest.raises(UnknownLayout, match="neither calls parser.add_argument on a @dataclass"):
        load_source(pkg)
    monkeypatch.setattr(layouts, "LAYOUTS", [*layouts.LAYOUTS, PlainClass()])
    src = load_source(pkg)
    assert src.era == "D"
    assert [f.option_strings for f in src.flags[:2]] == [["--tp-size"], ["--opt-0"]]
    assert src.by_option["--opt-59"].default == 7          # the field default, read by the shared extractor
    assert normalise_argv(src, ["--tp-size", "2", "--opt-3", "5"]) == {"tp_size": 2, "opt_3": 5}


def test_layout_names_are_unique_and_each_says_its_releases():
    assert sorted(layouts.BY_NAME) == ["A", "B", "C"]
    assert [layout.releases for layout in layouts.LAYOUTS] == [">= 0.5.20", "0.5.14 - 0.5.19", "<= 0.5.13.post1"]


@pytest.mark.wheels
@pytest.mark.parametrize(("era", "release"), sorted(RELEASE_OF_LAYOUT.items()))
def test_each_layout_detects_its_releases(era, release):
    ex = Extractor(Tree(sglang_source_tree(release)))
    assert layouts.detect(ex) is layouts.BY_NAME[era]
    assert load_source(sglang_source_tree(release)).era == era
    # Order matters: a layout-B ServerArgs is still a @dataclass that adds its deprecated aliases by
    # hand (layout A's detect() says yes too), and layout C's ServerArgs.add_cli_args still calls
    # add_cli_args_from_dataclass (B's says yes too); the newer layout is tried first.
    said_yes = [layout.name for layout in layouts.LAYOUTS if layout.detect(ex)]
    assert said_yes == {"A": ["A"], "B": ["B", "A"], "C": ["C", "B"]}[era]


HARDWARE = {"gpu_model": "NVIDIA H200", "gpu_count": 8, "compute_capability": "9.0", "source": "declared"}
QWEN3 = {"architectures": ["Qwen3ForCausalLM"], "max_position_embeddings": 40960}


@pytest.mark.wheels
@pytest.mark.parametrize("release", sorted(RELEASE_OF_LAYOUT.values()))
def test_predict_gives_one_finding_per_registry_entry_in_registry_order(release):
    src = load_source(sglang_source_tree(release))
    args = normalise_argv(src, ["--model-path", "/models/Qwen3-8B", "--tp", "2", "--speculative-algorithm", "EAGLE",
                                "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                                "--speculative-num-draft-tokens", "4", "--mem-fraction-static", "0.8"])
    findings = predict(src, args, HARDWARE, QWEN3)
    assert [f.name for f in findings] == [o.label for o in OPTIMISATIONS + SETTINGS]
    assert {f.status for f in findings} <= set(STATUSES)
    by = {f.name: f for f in findings}
    assert by["speculative decoding"].value == {"algorithm": "EAGLE", "num_steps": 3, "eagle_topk": 1,
                                                "num_draft_tokens": 4}
    assert by["mem_fraction_static"].value == 0.8
    assert by["context_length"].value == 40960
    assert by["custom all-reduce"].status == "on"


def test_every_predictor_is_a_function_of_predict_py():
    for o in OPTIMISATIONS + SETTINGS:
        assert callable(getattr(predict_module, o.predictor)), o.key


def test_statuses_are_the_enum_values_in_report_order():
    assert STATUSES == ("on", "auto-disabled", "unavailable on this hardware", "off by default")
    assert Status("off by default") is Status.OFF_BY_DEFAULT
    assert json.dumps({"status": STATUSES[0]}) == '{"status": "on"}'


def test_expectation_keys_include_aliases_and_name_labels():
    assert EXPECT_KEYS["prefill_cuda_graph"] == EXPECT_KEYS["piecewise_cuda_graph"] == "prefill/piecewise CUDA graph"
    assert sorted(EXPECT_KEYS) == ["cuda_graph", "custom_all_reduce", "flashinfer_allreduce_fusion",
                                   "piecewise_cuda_graph", "prefill_cuda_graph", "single_batch_overlap",
                                   "speculative", "two_batch_overlap"]
    assert len(set(SERVER_FIELDS)) == len(SERVER_FIELDS)
    assert set(SERVER_FIELDS) == {f for o in OPTIMISATIONS + SETTINGS for f in o.server_fields}
    # 0.5.18+ resolve both graphs into one field: read by both, listed once
    assert [o.key for o in OPTIMISATIONS if "cuda_graph_config" in o.server_fields] == ["piecewise_cuda_graph",
                                                                                        "cuda_graph"]


# What SGLang's /server_info says, by layout (field names as in the real releases' ServerArgs).
@pytest.mark.parametrize(("info", "label", "expected"), [
    ({"cuda_graph_backend_prefill": "breakable", "disable_piecewise_cuda_graph": True},
     "prefill/piecewise CUDA graph", (True, "cuda_graph_backend_prefill=breakable")),
    ({"disable_piecewise_cuda_graph": True}, "prefill/piecewise CUDA graph",
     (False, "disable_piecewise_cuda_graph=true")),
    ({"enable_piecewise_cuda_graph": False}, "prefill/piecewise CUDA graph",
     (False, "enable_piecewise_cuda_graph=false")),
    ({"cuda_graph_backend_decode": "disabled", "disable_cuda_graph": False}, "decode CUDA graph",
     (False, "cuda_graph_backend_decode=disabled")),
    ({"disable_custom_all_reduce": False, "tp_size": 1}, "custom all-reduce", (False, "tp_size=1")),
    ({"tp_size": 1}, "custom all-reduce", None),
    ({"cuda_graph_config": {"decode": {"backend": "full"}, "prefill": {"backend": "disabled"}},
      "cuda_graph_backend_prefill": None}, "prefill/piecewise CUDA graph",
     (False, "cuda_graph_config.prefill.backend=disabled")),
    ({"cuda_graph_config": {"decode": {"backend": "full"}}, "disable_cuda_graph": False}, "decode CUDA graph",
     (True, "cuda_graph_config.decode.backend=full")),
    ({"disable_custom_all_reduce": False, "tp_size": 2}, "custom all-reduce",
     (True, "disable_custom_all_reduce=false")),
    ({"enable_flashinfer_allreduce_fusion": None}, "FlashInfer all-reduce fusion", None),
    ({"enable_two_batch_overlap": True}, "two-batch overlap", (True, "enable_two_batch_overlap=true")),
    ({"speculative_algorithm": None}, "speculative decoding", (False, "speculative_algorithm=unset")),
    ({"speculative_algorithm": "EAGLE"}, "speculative decoding", (True, "speculative_algorithm=EAGLE")),
])
def test_the_registry_reads_server_info(info, label, expected):
    assert BY_LABEL[label].read(info) == expected


def test_the_reader_package_is_self_contained():
    """Only relative imports inside the package (it is copied next to the simulator, without Ansible)."""
    import ast
    import pathlib

    root = pathlib.Path(predict_module.__file__).parent
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            assert not [n for n in names if n.split(".")[0] in ("ansible", "sglang_source")], (path, names)
