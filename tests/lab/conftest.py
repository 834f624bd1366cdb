"""Lab fleets and how `make lab-test` spreads them over pytest-xdist workers.

Each lab module runs on a fleet of its own, except where modules only read a fleet (or leave it
as they found it, which they assert) and need the same one: those share it (SHARED_FLEETS), so
its hosts are started, prepared and deployed once. `make lab-test` hands each fleet's tests,
whole, to one worker (--dist loadgroup: an xdist_group per fleet, added below), longest first
(--no-loadscope-reorder: in collection order, not by test count), so the long ones do not start
last and run alone.

Seconds per module (fleet setup included), measured with three workers beside molecule on the
2-core CI-class machine in a fresh-clone `make test`, 2026-12-02 (lab phase 31 min, 52 tests); a
module not listed goes last. Re-measure with `--durations=0`.
"""

import pytest
from lab_fleet import deployed_lab_fleet

MODULE_SECONDS = {
    "test_rollout_lab.py": 840,
    "test_audit_lab.py": 776,
    "test_bad_inputs_lab.py": 732,
    "test_rollout_recovery_lab.py": 684,
    "test_verify_lab.py": 505,
    "test_router_lab.py": 470,
    "test_deploy_lab.py": 407,
    "test_secrets_lab.py": 261,
    "test_pd_lab.py": 230,
    "test_multinode_lab.py": 206,
    "test_supply_chain_lab.py": 171,
    "test_upgrade_preview_lab.py": 200,
    "test_lab_tool.py": 22,
}

# Fleets used by several modules, run in this order on one worker: the upgrade preview changes
# nothing on ct129 (its tests assert it), so it runs first on the fleet the deploy tests then change.
SHARED_FLEETS = {"ct129_deployed": ("test_upgrade_preview_lab.py", "test_deploy_lab.py")}
FLEET_OF = {module: fleet for fleet, modules in SHARED_FLEETS.items() for module in modules}


@pytest.fixture(scope="session")
def ct129_deployed(tmp_path_factory):
    """ct129 alone, prepared and deployed (10.89.83.0/24, sglang-deploy-*)."""
    with deployed_lab_fleet(tmp_path_factory.mktemp("ct129-deployed"), "sglang-deploy", "10.89.83.",
                            hosts=["ct129"]) as fleet:
        yield fleet


def _fleet_seconds(name):
    return sum(MODULE_SECONDS.get(m, 0) for m in SHARED_FLEETS.get(name, (name,)))


def _rank(module):
    fleet = FLEET_OF.get(module, module)
    order = SHARED_FLEETS[fleet].index(module) if fleet in SHARED_FLEETS else 0
    return -_fleet_seconds(fleet), fleet, order


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: _rank(item.path.name))  # stable: a module's own order is kept
    for item in items:
        item.add_marker(pytest.mark.xdist_group(FLEET_OF.get(item.path.name, item.path.name)))
