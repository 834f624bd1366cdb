"""The flag check, audit and drift read the installed SGLang on the host, with the host's own Python:
the reader (plugins/module_utils/source/) and the static audit (plugins/module_utils/audit/host_audit.py) must
give the same flag table, validation, normalised argv and audit under each Python 3.9-3.13 present
as under the test runner's, on a real release of each source layout; under 3.8 (still an Ansible
target) the reader refuses with what to do, where it used to fail half-way with an AttributeError.

Each interpreter imports the module_utils as Ansible ships them to a host: the collection's
`ansible_collections.sglang.fleet.plugins.module_utils` packages (no ansible-core on the host),
standard library only.
"""

import json
import pathlib
import subprocess
import sys

import pytest
from host_pythons import TARGET_MINORS, interpreter
from wheels import sglang_source_tree

REPO = pathlib.Path(__file__).resolve().parents[2]
RELEASES = ("0.5.11", "0.5.18", "0.5.23")  # layouts A, B and C
# The seeds' ct129 (2x RTX A6000, Qwen3.6-27B, NEXTN 3/1/4), with a misspelled and a removed flag
ARGS = {"model_path": "/models/Qwen3.6-27B", "tp_size": 2, "speculative_algorithm": "NEXTN",
        "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
        "mem_fraction_static": 0.88, "context_length": 131072}
ARGV_EXTRA = ["--tp", "2", "--cuda-graph-max-bs", "8", "--enable-ep-moe", "--mem-fraction-statc", "0.8"]
HARDWARE = {"gpu_model": "NVIDIA RTX A6000", "gpu_count": 2}
DRIVER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.sglang.fleet.plugins.module_utils import source as reader
from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import declared_facts
from ansible_collections.sglang.fleet.plugins.module_utils.host.args import to_argv
from ansible_collections.sglang.fleet.plugins.module_utils.audit.host_audit import static_audit

case = json.loads(sys.argv[2])
out = {}
for release, tree in case["trees"].items():
    src = reader.load_source(tree)
    argv = to_argv(case["args"])
    report = static_audit(src, case["args"], declared_facts(case["hardware"]), {}, source_path=tree)
    out[release] = {
        "layout": src.era, "version": src.version,
        "flags": sorted((f.option_strings[0], f.dest, str(f.default), repr(f.choices), f.nargs) for f in src.flags),
        "problems": [repr(p) for p in reader.validate_argv(src, argv + case["extra"])],
        "normalised": reader.normalise_argv(src, argv),
        "audit": report,
    }
print(json.dumps(out, sort_keys=True, default=repr))
"""


@pytest.fixture(scope="module")
def case():
    return json.dumps({"trees": {r: str(sglang_source_tree(r)) for r in RELEASES}, "args": ARGS,
                       "extra": ARGV_EXTRA, "hardware": HARDWARE})


def run(exe, case):
    p = subprocess.run([exe, "-I", "-c", DRIVER, str(REPO / ".collections"), case], capture_output=True, text=True,
                       timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


@pytest.fixture(scope="module")
def expected(case):
    got = run(sys.executable, case)
    # the driver really read three layouts and found the bad flags (so equal outputs mean something)
    assert [got[r]["layout"] for r in RELEASES] == sorted({got[r]["layout"] for r in RELEASES})
    for r in RELEASES:
        assert len(got[r]["flags"]) > 200 and len(got[r]["problems"]) >= 2, got[r]["problems"]
        assert "--mem-fraction-statc" in " ".join(got[r]["problems"])
    return got


@pytest.mark.parametrize("minor", [m for m in TARGET_MINORS if m >= 9])
def test_same_reading_on_every_target_python(minor, case, expected):
    exe = interpreter(minor)
    if exe is None:
        pytest.skip(f"no Python 3.{minor} on this machine")
    assert run(exe, case) == expected


def test_an_older_python_is_refused_with_what_to_do(case):
    exe = interpreter(8)
    if exe is None:
        pytest.skip("no Python 3.8 on this machine")
    p = subprocess.run([exe, "-I", "-c", DRIVER, str(REPO / ".collections"), case], capture_output=True, text=True,
                       timeout=300, check=False)
    assert p.returncode != 0
    assert (f"UnsupportedPython: reading SGLang's source on the host needs Python 3.9 or newer, and Ansible runs "
            f"{exe} (3.8.") in p.stderr, p.stderr[-2000:]
    assert "set ansible_python_interpreter for this host to a newer Python" in p.stderr
