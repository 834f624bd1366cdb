"""Fixtures shared by the source reader's tests on real wheels."""
import pytest
from wheels import sglang_source_tree

from ansible_collections.sglang.fleet.plugins.module_utils.source import load_source


@pytest.fixture(scope="module")
def src():
    """src(version): the reader's reading of that release's real wheel, once per test module."""
    cache = {}

    def get(version):
        if version not in cache:
            cache[version] = load_source(sglang_source_tree(version))
        return cache[version]
    return get
