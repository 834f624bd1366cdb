"""Shared test setup.

The collection's code imports as Ansible imports it, `ansible_collections.sglang.fleet.plugins...`:
pytest.ini puts `.collections` (whose `ansible_collections/sglang/fleet` links to the repository
root) on sys.path. This file stays so that helpers run outside pytest can `import conftest` for the
same path.
"""
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
COLLECTIONS = str(REPO / ".collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
