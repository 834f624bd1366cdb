"""Fixtures shared by the source reader's tests on real wheels."""
import pytest
from ansible.module_utils.sglang_source import load_source
from wheels import sglang_source_tree


@pytest.fixture(scope="module")
def src():
    """src(version): the reader's reading of that release's real wheel, once per test module."""
    cache = {}

    def get(version):
        if version not in cache:
            cache[version] = load_source(sglang_source_tree(version))
        return cache[version]
    return get
