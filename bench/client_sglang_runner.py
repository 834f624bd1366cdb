"""Run `python -m sglang.bench_serving` from a light venv without torch.

`import sglang` runs sglang/__init__.py, which imports the runtime (sglang.srt.utils.common ->
torch). bench_serving itself needs only sglang.benchmark.*, sglang.srt.utils.network and one
constant from sglang.srt.disaggregation.utils, so this registers those packages as bare modules
(their __path__ only, no __init__ run) and the constant, then runs bench_serving as __main__.
Checked with sglang 0.5.23: `sglvenv/bin/python bench/client_sglang_runner.py --backend sglang-oai ...`
"""

import importlib.util
import pathlib
import runpy
import sys
import types

ROOT = pathlib.Path(importlib.util.find_spec("sglang").origin).parent


def bare(name: str, path: pathlib.Path) -> None:
    """Register package `name` at `path` without running its __init__."""
    m = types.ModuleType(name)
    m.__path__ = [str(path)]
    sys.modules[name] = m


bare("sglang", ROOT)
bare("sglang.srt", ROOT / "srt")
bare("sglang.srt.utils", ROOT / "srt" / "utils")
bare("sglang.srt.disaggregation", ROOT / "srt" / "disaggregation")
disagg = types.ModuleType("sglang.srt.disaggregation.utils")
disagg.FAKE_BOOTSTRAP_HOST = "2.2.2.2"  # the value in sglang/srt/disaggregation/utils.py (0.5.23)
sys.modules[disagg.__name__] = disagg

if __name__ == "__main__":
    sys.argv[0] = "sglang.bench_serving"
    runpy.run_module("sglang.bench_serving", run_name="__main__", alter_sys=True)
