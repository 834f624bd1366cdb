"""Flag history (curated, pure data): flags that moved, and what replaces them in a given release.

Kept as a Python module (not JSON) because Ansible's AnsiballZ ships only Python module_utils to hosts."""
from __future__ import annotations

# old flag -> (what happened, [(replacement option, value or None), ...] in order of preference).
# The first replacement the installed release accepts (option exists, value valid) is suggested.
FLAG_HISTORY: dict[str, tuple[str, list[tuple[str, str | None]]]] = {
    "--enable-piecewise-cuda-graph": (
        ("opt-in piecewise CUDA graph (<= 0.5.9); piecewise became the default, then the prefill "
         "CUDA graph backend became --cuda-graph-backend-prefill (0.5.14)"),
        [("--cuda-graph-backend-prefill", "tc_piecewise"), ("--cuda-graph-backend-prefill", "breakable"),
         ("--enforce-piecewise-cuda-graph", None)]),
    "--enforce-piecewise-cuda-graph": (
        ("0.5.10-0.5.13 flag, a deprecated alias of --cuda-graph-backend-prefill=tc_piecewise in "
         "0.5.14-0.5.19, removed in 0.5.20; an explicit prefill backend skips the auto-disable rules"),
        [("--cuda-graph-backend-prefill", "tc_piecewise"), ("--cuda-graph-backend-prefill", "breakable"),
         ("--enable-piecewise-cuda-graph", None)]),
    "--disable-piecewise-cuda-graph": (
        "0.5.10-0.5.13 flag, deprecated alias in 0.5.14-0.5.19, removed in 0.5.20",
        [("--cuda-graph-backend-prefill", "disabled")]),
    "--enable-breakable-cuda-graph": (
        "deprecated alias of --cuda-graph-backend-prefill=breakable, removed in 0.5.20",
        [("--cuda-graph-backend-prefill", "breakable")]),
    "--piecewise-cuda-graph-tokens": ("removed in 0.5.20", [("--cuda-graph-bs-prefill", None)]),
    "--piecewise-cuda-graph-max-tokens": ("removed in 0.5.20", [("--cuda-graph-max-bs-prefill", None)]),
    "--piecewise-cuda-graph-compiler": ("removed in 0.5.20", [("--cuda-graph-tc-compiler", None)]),
    "--cuda-graph-max-bs": (
        ("split into --cuda-graph-max-bs-decode / --cuda-graph-max-bs-prefill (0.5.14); deprecated "
         "alias until 0.5.19; from 0.5.20 an ambiguous prefix"),
        [("--cuda-graph-max-bs-decode", None), ("--cuda-graph-max-bs-prefill", None)]),
    "--cuda-graph-bs": (
        "split into --cuda-graph-bs-decode / --cuda-graph-bs-prefill (0.5.14); removed in 0.5.20",
        [("--cuda-graph-bs-decode", None), ("--cuda-graph-bs-prefill", None)]),
    "--enable-flashinfer-allreduce-fusion": (
        "replaced by --flashinfer-allreduce-fusion-backend (0.5.14)",
        [("--flashinfer-allreduce-fusion-backend", "auto")]),
    "--stream-output": ("removed in 0.5.20", [("--incremental-streaming-output", None)]),
    "--nsa-prefill-backend": ("renamed (DSA), removed in 0.5.20", [("--dsa-prefill-backend", None)]),
    "--nsa-decode-backend": ("renamed (DSA), removed in 0.5.20", [("--dsa-decode-backend", None)]),
    "--speculative-dflash-draft-window-size": ("removed in 0.5.20",
                                               [("--speculative-draft-window-size", None)]),
    "--mamba-scheduler-strategy": ("removed in 0.5.20", [("--mamba-radix-cache-strategy", None)]),
    "--enable-dsa-prefill-context-parallel": ("removed in 0.5.20", [("--enable-prefill-cp", None)]),
    "--enable-nsa-prefill-context-parallel": ("removed in 0.5.20", [("--enable-prefill-cp", None)]),
    "--enable-prefill-context-parallel": ("removed in 0.5.20", [("--enable-prefill-cp", None)]),
    "--enable-gdn-replayssm-spec": ("removed in 0.5.20", [("--enable-linear-replayssm-spec", None)]),
    "--dsa-prefill-cp-mode": ("removed in 0.5.20", [("--cp-strategy", None)]),
    "--nsa-prefill-cp-mode": ("removed in 0.5.20", [("--cp-strategy", None)]),
    "--prefill-cp-mode": ("removed in 0.5.20", [("--cp-strategy", None)]),
    "--enable-expert-distribution-metrics": (
        "removed; use --expert-balancedness-report-mode {off,server_log,prometheus,both}",
        [("--expert-balancedness-report-mode", "prometheus")]),
    "--collect-tokens-histogram": (
        "removed in 0.5.20; token histograms are collected when --enable-metrics is set",
        [("--enable-metrics", None)]),
    "--prefill-round-robin-balance": ("removed in 0.5.20 (no effect since deprecation)", []),
    "--disable-cuda-graph": (
        "deprecated: use --cuda-graph-backend-decode disabled and --cuda-graph-backend-prefill disabled",
        [("--cuda-graph-backend-decode", "disabled")]),
}
