"""upgrade-preview.yml on lab hosts of its own (10.89.110.0/24, sglang-upgrade-*).

Deploys the lab (ct129 runs 0.5.11), then previews 0.5.23 on ct129: the prefill CUDA graph goes
from auto-disabled (0.5.11 server_args.py:1229) to on (0.5.23's breakable allow-list,
configs/model_config.py:2501), the report lands in reports/ct129/upgrade-0.5.11-0.5.23-<UTC>.json,
and nothing on the host changes (no file written, the same unit, server, venvs and records). A
target not on PyPI stops before any host is read; a target that refuses the host's argv says so.
Needs podman and the lab image (`make lab-image`).
"""
import json

import pytest
import yaml
from lab_fleet import REPO, deployed_lab_fleet, recap, unflow

pytestmark = pytest.mark.lab

PREFILL = ("prefill/piecewise CUDA graph: auto-disabled [sglang/srt/server_args.py:1229] -> on (breakable) "
           "[sglang/srt/configs/model_config.py:2501]")
MARK = "/run/sglang-upgrade-preview.mark"
# What a preview must leave as it was, and every file written after the mark where the project writes.
HOST_STATE = ("systemctl show sglang -p MainPID; sha256sum /etc/systemd/system/sglang.service; "
              "readlink /opt/ml-env/current; ls /opt/ml-env; find /var/lib/sglang-fleet -type f | sort | xargs sha256sum; "
              f"find /etc /opt /var/lib/sglang-fleet /usr/local /models -xdev -type f -newer {MARK} | sort")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with deployed_lab_fleet(tmp_path_factory.mktemp("upgrade-lab"), "sglang-upgrade", "10.89.110.",
                            hosts=["ct129"], shared=True) as fleet:
        yield fleet


def test_ct129_preview_shows_the_prefill_graph_flip_and_changes_nothing(fleet):
    fleet.ssh("ct129", f"touch {MARK}")
    before = fleet.ssh("ct129", HOST_STATE)
    rc, out = fleet.play("upgrade-preview.yml", "-l", "ct129", "-e", "sglang_upgrade_to=0.5.23")
    assert rc == 0, out
    text = unflow(out)
    assert "ct129: sglang 0.5.11 (era A) -> 0.5.23 (era C)" in text
    assert PREFILL in text
    assert "flags: the target accepts this argv" in text
    assert "ct129 0.5.11 -> 0.5.23: argv accepted; prefill/piecewise CUDA graph auto-disabled -> on;" in text
    assert recap(out, "ct129")["changed"] == 0 and recap(out, "ct129")["failed"] == 0
    stamped = sorted((fleet.reports / "ct129").glob("upgrade-0.5.11-0.5.23-*Z.json"))
    assert len(stamped) == 1
    report = json.loads(stamped[0].read_text())
    flip = next(o for o in report["optimisations"] if o["name"] == "prefill/piecewise CUDA graph")
    assert (flip["from"]["rule"], flip["to"]["rule"]) == ("sglang/srt/server_args.py:1229",
                                                          "sglang/srt/configs/model_config.py:2501")
    assert report["from_source"].startswith("release record 0.5.11-")
    assert report["compat"]["status"] in ("ok", "unknown", "blocked")
    after = fleet.ssh("ct129", HOST_STATE)
    assert after == before


def test_a_target_not_on_pypi_stops_before_any_host_is_read(fleet):
    fleet.ssh("ct129", f"touch {MARK}")
    before = fleet.ssh("ct129", HOST_STATE)
    rc, out = fleet.play("upgrade-preview.yml", "-l", "ct129", "-e", "sglang_upgrade_to=0.5.99")
    assert rc == 2, out
    assert "sglang 0.5.99 is not a release on " in unflow(out) and "pip index versions sglang" in unflow(out)
    assert "Read the host's release records" not in out
    assert fleet.ssh("ct129", HOST_STATE) == before


def test_a_target_that_refuses_the_hosts_argv_says_so_and_changes_nothing(fleet):
    """ct129 deployed with --cuda-graph-max-bs 32 (0.5.11 takes it): 0.5.23 would not start with that
    argv (two flags now begin with it), and the preview says so, with the flag to write instead."""
    args = {**yaml.safe_load((REPO / "inventories" / "lab" / "host_vars" / "ct129.yml").read_text())["sglang_args"],
            "cuda_graph_max_bs": 32}
    rc, out = fleet.play("deploy.yml", "-l", "ct129", "-e", json.dumps({"sglang_args": args}), "--skip-tags", "sglang_verify")
    assert rc == 0, out
    fleet.ssh("ct129", f"touch {MARK}")
    before = fleet.ssh("ct129", HOST_STATE)
    rc, out = fleet.play("upgrade-preview.yml", "-l", "ct129", "-e", "sglang_upgrade_to=0.5.23")
    assert rc == 0, out  # a preview reports; it fails nothing
    text = unflow(out)
    assert "flags: the target REFUSES this argv (the server would not start)" in text
    assert "target predicted with: --cuda-graph-max-bs -> --cuda-graph-max-bs-decode 32" in text
    assert "ct129 0.5.11 -> 0.5.23: the target REFUSES the argv; prefill/piecewise CUDA graph auto-disabled -> on;" in text
    assert fleet.ssh("ct129", HOST_STATE) == before
