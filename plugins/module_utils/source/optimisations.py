"""The audited optimisations: the one registry the prediction, the audit, drift, the reports and
the simulator take their keys, labels, statuses and ``/server_info`` fields from.

For each optimisation: ``key`` (``sglang_expect.<key>``, also the simulator's
``disable_optimization`` fault), ``label`` (``Finding.name`` and the reports' wording), ``short``
(compact reports' column), ``predictor`` (the function of predict.py that decides it) and
``value`` (what its ``Finding.value`` holds), ``server_fields`` (the ``/server_info`` fields it is
read from) and ``read`` (server_info -> ``(on, evidence)``, or None when the server does not say).
``SETTINGS`` are the findings that carry a value rather than on/off (checked as numbers).

Pure data plus the readers of ``/server_info``; nothing here predicts (the simulator imports it
for the names and fields and must never call ``predict``). Stdlib only.

A new audited optimisation: one ``Optimisation`` entry here (in the order the report lists it)
and its predictor function in predict.py (called from ``predict``), plus tests.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Callable


class Status(enum.Enum):
    """What the installed release will do with an optimisation (``Finding.status``)."""

    ON = "on"
    AUTO_DISABLED = "auto-disabled"
    UNAVAILABLE = "unavailable on this hardware"
    OFF_BY_DEFAULT = "off by default"


# Finding.status holds the plain strings (JSON, reports and sglang_expect compare them as text).
STATUSES = tuple(s.value for s in Status)
ON, AUTO_DISABLED, UNAVAILABLE, OFF_BY_DEFAULT = STATUSES


def _show(value) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _has(r: dict, key: str) -> bool:
    return key in r and r[key] is not None


def _graph_config_backend(r: dict, phase: str):
    """The backend a phase's CUDA graph resolved to, from ``cuda_graph_config`` (0.5.18+: the
    per-phase flags stay as given, None when unset, and the resolution lands here; the real 0.5.23
    answers ``{"decode": {"backend": "disabled", ...}, "prefill": {...}}``), else None."""
    config = r.get("cuda_graph_config")
    backend = (config.get(phase) or {}).get("backend") if isinstance(config, dict) else None
    return backend if isinstance(backend, str) else None


def _read_prefill_graph(r: dict):
    backend = _graph_config_backend(r, "prefill")
    if backend:
        return backend != "disabled", f"cuda_graph_config.prefill.backend={backend}"
    if _has(r, "cuda_graph_backend_prefill"):       # layouts B/C: per-phase backend
        return r["cuda_graph_backend_prefill"] != "disabled", \
            f"cuda_graph_backend_prefill={_show(r['cuda_graph_backend_prefill'])}"
    if _has(r, "disable_piecewise_cuda_graph"):     # 0.5.10 - 0.5.13: on by default
        return not r["disable_piecewise_cuda_graph"], \
            f"disable_piecewise_cuda_graph={_show(r['disable_piecewise_cuda_graph'])}"
    if _has(r, "enable_piecewise_cuda_graph"):      # <= 0.5.9: opt-in
        return bool(r["enable_piecewise_cuda_graph"]), \
            f"enable_piecewise_cuda_graph={_show(r['enable_piecewise_cuda_graph'])}"
    return None


def _read_decode_graph(r: dict):
    backend = _graph_config_backend(r, "decode")
    if backend:
        return backend != "disabled", f"cuda_graph_config.decode.backend={backend}"
    if _has(r, "cuda_graph_backend_decode"):
        return r["cuda_graph_backend_decode"] != "disabled", \
            f"cuda_graph_backend_decode={_show(r['cuda_graph_backend_decode'])}"
    if _has(r, "disable_cuda_graph"):
        return not r["disable_cuda_graph"], f"disable_cuda_graph={_show(r['disable_cuda_graph'])}"
    return None


def _read_custom_all_reduce(r: dict):
    if not _has(r, "disable_custom_all_reduce"):
        return None
    if int(r.get("tp_size") or 1) <= 1:     # one rank: nothing to all-reduce, whatever the flag says
        return False, f"tp_size={_show(r.get('tp_size') or 1)}"
    return not r["disable_custom_all_reduce"], \
        f"disable_custom_all_reduce={_show(r['disable_custom_all_reduce'])}"


def _read_fusion(r: dict):
    if isinstance(r.get("enable_flashinfer_allreduce_fusion"), bool):
        return r["enable_flashinfer_allreduce_fusion"], \
            f"enable_flashinfer_allreduce_fusion={_show(r['enable_flashinfer_allreduce_fusion'])}"
    return None


def _read_enable(field: str):
    def read(r: dict):
        if _has(r, field):
            return bool(r[field]), f"{field}={_show(r[field])}"
        return None
    return read


def _read_speculative(r: dict):
    return bool(r.get("speculative_algorithm")), f"speculative_algorithm={_show(r.get('speculative_algorithm'))}"


@dataclasses.dataclass(frozen=True)
class Optimisation:
    key: str                       # sglang_expect.<key>; the simulator's disable_optimization value
    label: str                     # Finding.name, and the wording of every report
    short: str                     # its column in compact reports (release sweep); "": not shown there
    predictor: str                 # the function of predict.py that decides it
    value: str                     # what Finding.value holds
    server_fields: tuple           # /server_info fields it is read from (all layouts), shown in the report
    read: Callable | None = None      # server_info -> (on, evidence) | None (the server does not say)
    aliases: tuple = ()            # other sglang_expect keys for it
    show_value: bool = False       # report lines show the predicted value next to the status


OPTIMISATIONS: tuple = (
    Optimisation("piecewise_cuda_graph", "prefill/piecewise CUDA graph", "prefill graph", "_prefill_graph",
                 "bool (<= 0.5.13) or the prefill backend name (0.5.14 on)",
                 ("disable_piecewise_cuda_graph", "enforce_piecewise_cuda_graph", "enable_piecewise_cuda_graph",
                  "cuda_graph_backend_prefill", "cuda_graph_config"), _read_prefill_graph,
                 aliases=("prefill_cuda_graph",)),
    Optimisation("cuda_graph", "decode CUDA graph", "decode graph", "_decode_graph", "bool",
                 ("cuda_graph_backend_decode", "disable_cuda_graph", "cuda_graph_config"), _read_decode_graph),
    Optimisation("custom_all_reduce", "custom all-reduce", "custom AR", "_custom_all_reduce", "bool",
                 ("disable_custom_all_reduce", "tp_size"), _read_custom_all_reduce),
    Optimisation("flashinfer_allreduce_fusion", "FlashInfer all-reduce fusion", "AR fusion", "_fusion", "bool",
                 ("enable_flashinfer_allreduce_fusion",), _read_fusion),
    Optimisation("single_batch_overlap", "single-batch overlap", "", "_overlap", "bool",
                 ("enable_single_batch_overlap",), _read_enable("enable_single_batch_overlap")),
    Optimisation("two_batch_overlap", "two-batch overlap", "", "_overlap", "bool",
                 ("enable_two_batch_overlap",), _read_enable("enable_two_batch_overlap")),
    Optimisation("speculative", "speculative decoding", "spec", "_speculative",
                 "None, or {algorithm, num_steps, eagle_topk, num_draft_tokens}",
                 ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                  "speculative_num_draft_tokens"), _read_speculative, show_value=True),
)
# Findings that carry a setting's value (compared as numbers with the server's field of that name).
SETTINGS: tuple = (
    Optimisation("mem_fraction_static", "mem_fraction_static", "", "_mem_fraction_static",
                 "the float given, or 'auto'", ("mem_fraction_static",), show_value=True),
    Optimisation("context_length", "context_length", "", "_context_length",
                 "the int given, else the model's max_position_embeddings, or 'auto'", ("context_length",),
                 show_value=True),
)

BY_KEY = {o.key: o for o in OPTIMISATIONS + SETTINGS}
LABEL = {k: o.label for k, o in BY_KEY.items()}           # key -> label
BY_LABEL = {o.label: o for o in OPTIMISATIONS + SETTINGS}
# sglang_expect keys naming an optimisation (aliases included) -> label
EXPECT_KEYS = {k: o.label for o in OPTIMISATIONS for k in (o.key, *o.aliases)}
# speculative_* settings -> keys of the speculative finding's value
SPECULATIVE_FIELDS = {"speculative_algorithm": "algorithm", "speculative_num_steps": "num_steps",
                      "speculative_eagle_topk": "eagle_topk", "speculative_num_draft_tokens": "num_draft_tokens"}
# every /server_info field the registry reads, in registry order
# each field once (cuda_graph_config holds both graphs' resolution), in registry order
SERVER_FIELDS = tuple(dict.fromkeys(f for o in OPTIMISATIONS + SETTINGS for f in o.server_fields))
SHORT = {o.label: o.short for o in OPTIMISATIONS + SETTINGS if o.short}
