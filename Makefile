# nats_edge.fleet: the two commands are `make demo` and `make test`.
# Both install what they need on a fresh Debian/Ubuntu machine (as root).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT := $(CURDIR)
VENV := $(ROOT)/.venv
CACHE := $(ROOT)/.cache
COLLECTION_LINK := $(ROOT)/.collections/ansible_collections/nats_edge/fleet
LAB := $(ROOT)/lab/fleetlab
DEBIAN_NATS := $(CACHE)/nats-server-debian/usr/sbin/nats-server

export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(ROOT)/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH := $(ROOT)/.collections
export NATS_SERVER_DEBIAN := $(DEBIAN_NATS)
export PYTHONDONTWRITEBYTECODE := 1

MODULES := $(patsubst plugins/modules/%.py,nats_edge.fleet.%,$(wildcard plugins/modules/*.py))

DEMO_LAB := demo
DEMO_HOSTS := hub-1:hub hub-2:hub hub-3:hub \
	spoke1-1:spoke1 spoke1-2:spoke1 spoke1-3:spoke1 \
	spoke2-1:spoke2 spoke2-2:spoke2 spoke2-3:spoke2
DEMO_PUBLISH := hub-1=127.0.0.1:4222:4222 hub-2=127.0.0.1:4232:4222 hub-3=127.0.0.1:4282:4222 \
	spoke1-1=127.0.0.1:4242:4222 spoke1-2=127.0.0.1:4252:4222 spoke1-3=127.0.0.1:4292:4222 \
	spoke2-1=127.0.0.1:4262:4222 spoke2-2=127.0.0.1:4272:4222 spoke2-3=127.0.0.1:4202:4222

.PHONY: help
help:
	@echo "make demo      bring up the 9-host lab, converge hub and spokes and their streams, print reports"
	@echo "make test      unit, integration and molecule tests (installs what it needs)"
	@echo "make unit | integration | molecule | bench | lint | build | demo-down | clean"

# --- toolchain -----------------------------------------------------------------

.PHONY: host-deps
host-deps:
	@if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv python3-pip; fi

$(VENV)/.installed: requirements-dev.txt spark/pyproject.toml | host-deps
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -r requirements-dev.txt
	@# the Spark data source and job, editable: Spark finds the source by its pyspark_* module
	$(VENV)/bin/pip install -q -e spark
	touch $@

.PHONY: venv
venv: $(VENV)/.installed $(COLLECTION_LINK) java

# A Java runtime for Spark (pyspark bundles Spark's jars, not a JVM).
.PHONY: java
java:
	@if ! command -v java >/dev/null 2>&1; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; fi

$(COLLECTION_LINK):
	mkdir -p $(dir $@)
	ln -sfn ../../.. $@

$(DEBIAN_NATS):
	@# Debian's nats-server (2.9.10 on bookworm): the oldest server we support.
	mkdir -p $(CACHE)/deb
	cd $(CACHE)/deb && (apt-get download nats-server 2>/dev/null || (apt-get update -qq && apt-get download nats-server))
	dpkg-deb -x $(CACHE)/deb/nats-server_*.deb $(CACHE)/nats-server-debian

.PHONY: lab-ready
lab-ready: venv
	$(LAB) setup
	$(LAB) image

# --- tests -----------------------------------------------------------------

.PHONY: test
test: lint unit integration molecule

.PHONY: unit
unit: venv
	pytest -q tests/unit

.PHONY: integration
integration: venv java $(DEBIAN_NATS)
	pytest -q tests/integration

.PHONY: molecule
molecule: lab-ready
	molecule test -s default
	molecule test -s archive
	molecule test -s spark

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
	python3 bench/bench_spark_read.py

.PHONY: lint
lint: venv
	ansible-playbook --syntax-check -i inventories/lab playbooks/site.yml playbooks/streams.yml playbooks/report.yml
	@# ansible-doc renders every module with its fragments (it exits 0 even for a module it cannot find)
	ansible-doc --json $(MODULES) | python3 -c 'import json, sys; \
	  docs = json.load(sys.stdin); missing = [m for m in sys.argv[1:] if not (docs.get(m) or {}).get("doc")]; \
	  sys.exit("no documentation for: %s" % " ".join(missing) if missing else 0)' $(MODULES)

# ansible-test wants the collection at .../ansible_collections/<namespace>/<name>, committed to git:
# sanity runs on a copy of the working tree (tracked and new files) made so.
SANITY_ROOT := $(CACHE)/sanity/ansible_collections/nats_edge/fleet
PYTHON_VERSION = $(shell $(VENV)/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')

.PHONY: sanity
sanity: venv
	rm -rf $(CACHE)/sanity && mkdir -p $(SANITY_ROOT)
	git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do \
	  if [ -e "$$f" ]; then cp --parents -P "$$f" $(SANITY_ROOT)/; fi; done
	cd $(SANITY_ROOT) && git init -q && git add -A && \
	  git -c user.name=sanity -c user.email=sanity@localhost commit -qm "working tree"
	@# the venvs of the sanity tests are bootstrapped offline (tests/sanity/get_pip.py says how)
	pip_version=$$(python3 -c 'import ansible_test, os, re; \
	  print(re.search(r"pip=.([0-9.]+).", open(os.path.join(os.path.dirname(ansible_test.__file__), \
	  "_internal", "python_requirements.py")).read()).group(1))'); \
	  mkdir -p $$HOME/.ansible/test/cache && \
	  cp tests/sanity/get_pip.py $$HOME/.ansible/test/cache/get_pip_$${pip_version//./_}.py
	cd $(SANITY_ROOT) && ansible-test sanity --local --python $(PYTHON_VERSION) --color no $(SANITY_ARGS)

.PHONY: build
build: venv
	ansible-galaxy collection build --force --output-path $(ROOT)/build

# --- the demo ----------------------------------------------------------------

.PHONY: demo
demo: lab-ready
	$(LAB) up --lab $(DEMO_LAB) $(DEMO_HOSTS) $(addprefix --publish ,$(DEMO_PUBLISH)) >/dev/null
	ansible-playbook -i inventories/lab playbooks/site.yml
	ansible-playbook -i inventories/lab playbooks/streams.yml
	python3 lab/demo-traffic
	ansible-playbook -i inventories/lab playbooks/streams.yml
	ansible-playbook -i inventories/lab playbooks/report.yml

.PHONY: demo-down
demo-down:
	$(LAB) down --lab $(DEMO_LAB)

.PHONY: clean
clean: demo-down
	rm -rf $(ROOT)/build $(ROOT)/.pytest_cache
