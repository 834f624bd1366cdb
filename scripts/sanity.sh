#!/usr/bin/env bash
# ansible-test sanity on the collection sglang.fleet (`make sanity`, part of `make test`).
# ansible-test runs only from a folder ansible_collections/<namespace>/<name>, so the checkout's
# files (tracked and new, not ignored) are copied to one first. Each sanity test gets its own venv
# with the requirements ansible-test pins (cached under ~/.ansible/test/venv).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$repo/.venv/bin}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dest=$work/ansible_collections/sglang/fleet
mkdir -p "$dest"
(cd "$repo" && git ls-files -co --exclude-standard | grep -v '^\.collections/' | tar -cf - -T -) | tar -xf - -C "$dest"
# ansible-test bootstraps pip in its venvs with get-pip.py from ci-files.testing.ansible.com; a
# machine that cannot reach it gets scripts/ansible_test_get_pip.py (pip from ensurepip) instead.
pip_version=$("$bin/python" -c 'import re, ansible_test._internal.python_requirements as m
print(re.search(r"pip=.([0-9.]+).,", open(m.__file__).read()).group(1))')
cache=$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py
if [[ ! -s $cache ]] && ! curl -fsS --max-time 20 -o "$cache.download" "https://ci-files.testing.ansible.com/ansible-test/get-pip-$pip_version.py" 2>/dev/null; then
  mkdir -p "$(dirname "$cache")" && cp "$repo/scripts/ansible_test_get_pip.py" "$cache"
elif [[ -s $cache.download ]]; then
  mv "$cache.download" "$cache"
fi
cd "$dest"
git init -q && git add -A
# What the collection ships: its plugins, the filters, its metadata. The tests, the lab and the
# benchmarks are checked by ruff and pytest (make lint, make unit).
PATH=$bin:$PATH "$bin/ansible-test" sanity --venv --python 3.11 --color no \
  --skip-test pslint --skip-test shellcheck "$@" plugins/ filter_plugins/ meta/ changelogs/ galaxy.yml
