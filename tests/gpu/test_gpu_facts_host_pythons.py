"""gpu_facts runs on the GPU host's own Python: every capture gives the same facts under each
Python 3.8-3.13 present as under the test runner's."""

import json
import pathlib
import subprocess

import pytest
from host_pythons import TARGET_MINORS, interpreter

from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import build_facts

REPO = pathlib.Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "gpu"
CAPTURES = sorted(p.parent for p in FIX.glob("*/query-gpu.csv"))
DRIVER = """
import importlib.util, json, os, sys
spec = importlib.util.spec_from_file_location("gpu_facts", sys.argv[1])
g = importlib.util.module_from_spec(spec)
spec.loader.exec_module(g)

def read(d, name):
    path = os.path.join(d, name)
    return open(path).read() if os.path.exists(path) else None

out = {d: g.build_facts(read(d, "query-gpu.csv"), read(d, "topo.txt"), read(d, "nvidia-smi.txt")) for d in sys.argv[2:]}
print(json.dumps(out, sort_keys=True))
"""


def read(d, name):
    p = d / name
    return p.read_text() if p.exists() else None


@pytest.mark.parametrize("minor", TARGET_MINORS)
def test_same_facts_on_every_target_python(minor):
    exe = interpreter(minor)
    if exe is None:
        pytest.skip(f"no Python 3.{minor} on this machine")
    assert len(CAPTURES) >= 4
    p = subprocess.run([exe, "-c", DRIVER, str(REPO / "plugins" / "module_utils" / "host" / "gpu_facts.py"), *map(str, CAPTURES)],
                       capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 0, p.stderr
    expected = {str(d): build_facts(read(d, "query-gpu.csv"), read(d, "topo.txt"), read(d, "nvidia-smi.txt"))
                for d in CAPTURES}
    assert json.loads(p.stdout) == json.loads(json.dumps(expected, sort_keys=True))
