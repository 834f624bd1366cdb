# sglang-fleet: `make demo` runs the whole job on the built-in lab fleet, `make test` all tests.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV := .venv
# The controller's interpreter: Debian 12's python3 where it is there with its venv module (built with
# profile-guided optimisation: a deploy's controller CPU -18 % against pyenv's default build, bench/README.md),
# else the python3 on PATH. requirements/dev.lock is pinned for Python 3.11.
PYTHON ?= $(shell /usr/bin/python3 -c 'import sys, ensurepip; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null \
	&& echo /usr/bin/python3 || echo python3)
BIN := $(VENV)/bin
PY := $(BIN)/python
LAB_INVENTORY := inventories/lab/hosts.yml
LAB_HOSTS := ct129 h200x2 h200x1 h200x1b cpu1 h200x1s router
PLAYBOOK := $(BIN)/ansible-playbook -i $(LAB_INVENTORY)
# The fleet report's page with charts (make report, make demo)
REPORT_HTML ?= reports/fleet-report.html
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: help demo tune-demo test lint sanity unit lab-test molecule llama-server venv audit verify releases report sweep docs docs-check lab-deps lab-image lab-up lab-status lab-smoke lab-down lab-prepare lab-hub \
        lab-test-real-replica deploy lock clean

help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(VENV)/.done: requirements/dev.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes -r requirements/dev.lock
	touch $@

venv: $(VENV)/.done ## Controller toolchain from the lock file

lock: ## Re-pin requirements/dev.lock from requirements/dev.in
	$(BIN)/uv pip compile --quiet --python-version 3.11 --generate-hashes requirements/dev.in -o requirements/dev.lock

lab-deps: ## Install podman & co (Debian 12, root)
	bash lab/install-deps.sh

lab-image: lab-deps ## Build the lab's Debian image (cached)
	bash lab/build-image.sh

lab-up: venv lab-image ## Start the lab fleet (3 hosts over SSH)
	$(PY) lab/lab.py up --inventory $(LAB_INVENTORY)

lab-status: venv ## Which lab hosts answer SSH
	$(PY) lab/lab.py status --inventory $(LAB_INVENTORY)

lab-smoke: lab-image ## Check the lab hosts' systemd stand-in on a throwaway network
	bash lab/smoke.sh

lab-down: venv ## Remove the lab fleet, stop its hub, remove deployed-fleet snapshots a killed test run left
	$(PY) lab/lab.py down --inventory $(LAB_INVENTORY)
	$(PY) lab/hub/hub.py down --dir .lab/hub
	podman images --format '{{.Repository}}:{{.Tag}}' --filter reference=localhost/sglang-fleet-snapshot \
		| xargs -r podman rmi --force >/dev/null; rm -rf .lab/snapshots

# The lab fleet's Hugging Face hub on the controller (lab/hub: olah behind a thin front), which
# inventories/lab/group_vars/sglang_lab.yml names: cpu1's and h200x1s's models come from it.
LAB_HUB_PORT := 18901
lab-hub: venv ## Start the lab's hub (olah, a real HF mirror) with its generated repositories
	$(PY) lab/hub/hub.py up --dir .lab/hub --port $(LAB_HUB_PORT)

lab-prepare: lab-up lab-hub ## Put the simulator and the declared models on the lab hosts, start the lab's hub
	$(PLAYBOOK) lab/prepare.yml

deploy: venv ## ansible-playbook deploy.yml on the lab fleet
	$(PLAYBOOK) deploy.yml

demo: lab-prepare ## Lab fleet up, site.yml (the router, then deploy: checks, install, audit, verify), verify through the router, drift, each host's service and the fleet report
	$(PLAYBOOK) site.yml
	$(PLAYBOOK) verify.yml --limit sglang_routers
	$(PLAYBOOK) drift.yml
	$(PLAYBOOK) lab/show.yml
	$(PY) scripts/fleet_report.py --html $(REPORT_HTML) $(LAB_HOSTS)

tune-demo: venv ## After make demo: the seeds' story, ct129 redeployed with 1-step MTP, then tune.yml finds, writes and serves its steps
	$(PY) lab/tune_demo.py

audit: venv ## ansible-playbook audit.yml on the lab fleet
	$(PLAYBOOK) audit.yml

verify: venv ## ansible-playbook verify.yml on the lab fleet
	$(PLAYBOOK) verify.yml

drift: venv ## ansible-playbook drift.yml on the lab fleet (read-only: where hosts differ from the inventory)
	$(PLAYBOOK) drift.yml

releases: venv ## Each lab host's releases, the current and last known good marked
	$(PLAYBOOK) releases.yml

report: venv ## The fleet's latest release, audit, verify and drift results as one table, and as a page with charts (REPORT_HTML)
	$(PY) scripts/fleet_report.py --html $(REPORT_HTML) $(LAB_HOSTS)

sweep: venv ## The source reader vs the real parser of every SGLang release on PyPI -> docs/release-sweep.md
	nice -n 10 $(PY) scripts/release_sweep.py

docs: venv ## Regenerate docs/variables.md's tables from each role's meta/argument_specs.yml
	$(PY) scripts/variables_doc.py

docs-check: venv ## docs/variables.md is current, every relative markdown link resolves, role READMEs share one skeleton
	$(PY) scripts/variables_doc.py --check
	$(BIN)/pytest -q -p no:cacheprovider tests/unit/test_doc_links.py tests/unit/test_role_contracts.py

lint: venv ## yamllint, ansible-lint (production profile), ruff
	$(BIN)/yamllint --strict .
	$(BIN)/ansible-lint
	$(BIN)/ruff check .

sanity: venv ## ansible-test sanity on the collection (plugins/ with its filters, filter_plugins/ links, meta/, changelogs/)
	BIN=$(CURDIR)/$(BIN) bash scripts/sanity.sh

# Test processes side by side (pytest-xdist): the llama-server build and the PyPI downloads
# overlap the other unit tests; each lab module owns its fleet (and molecule its own), so lab
# modules run at once (loadfile, longest first: tests/lab/conftest.py) next to molecule.
UNIT_WORKERS ?= 2
LAB_WORKERS ?= 3

unit: venv ## pytest: filters, modules, source reader on real wheels, bench client on llama-server, simulator
	$(BIN)/pytest -m "not lab" -n $(UNIT_WORKERS) --durations=15

lab-test: venv lab-image ## pytest -m lab: deploy, audit, verify and drift end to end on lab hosts of their own
	mkdir -p .lab && rm -f .lab/lab-cpu.jsonl
	LAB_CPU_LOG=$(CURDIR)/.lab/lab-cpu.jsonl $(BIN)/pytest -m lab -n $(LAB_WORKERS) --dist loadfile --no-loadscope-reorder --durations=0

lab-test-real-replica: venv lab-image ## The real module with two real SGLang servers behind the real router (make test: the second is a simulator host)
	SGLANG_FLEET_REAL_REPLICA=1 $(BIN)/pytest -m lab -v --durations=0 tests/lab/test_real_sglang_lab.py

molecule: venv lab-image ## molecule test (check, converge, idempotence, verify) on lab hosts
	$(BIN)/molecule test

llama-server: venv ## Build llama.cpp's llama-server for the real-engine tests (cached in ~/.cache/sglang-fleet/llama.cpp)
	PIP="$(BIN)/pip" bash tests/real_engine/build_llama_server.sh >/dev/null

# The llama-server build (CPU) first, beside the lab's installs and image build (mostly network
# and disk); then lint (ansible-lint keeps one core busy) beside sanity, then beside the unit tests;
# then molecule and the lab fleets side by side.
# Each phase's wall time is printed (`real`): bench/README.md keeps the breakdown of a fresh-clone run.
test: ## Everything CI runs: lint, sanity, unit, then molecule and lab-test side by side
	time $(MAKE) --no-print-directory -j2 --output-sync=target llama-server lab-image
	time $(MAKE) --no-print-directory -j2 --output-sync=target lint sanity unit
	time $(MAKE) --no-print-directory -j2 --output-sync=target molecule lab-test

clean: lab-down ## Remove the lab and local caches
	rm -rf .lab .cache
