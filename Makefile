# Two commands for a fresh Debian/Ubuntu machine (root, or sudo for apt-get):
#   make serve  installs the serving package (no torch) into .venv and serves the demo model
#   make test   installs everything the tests need (Debian packages + .venv) and runs them
# Both install into the virtualenv .venv of this checkout (VENV=... picks another), never
# into the system Python. Afterwards `. .venv/bin/activate` puts nmt-translate, nmt-serve
# and the other commands on PATH (or call them as .venv/bin/nmt-translate).
SYSTEM_PYTHON ?= python3
VENV ?= .venv
PYTHON := $(VENV)/bin/python
BIN := $(abspath $(VENV))/bin
# What `make test` installs with apt-get (--no-install-recommends): Apertium and WordNet
# (the corpus tests), nginx and Prometheus (run by the tests on free ports; on a systemd
# host the packages also start their own services on :80 and :9090), docker.io and
# debootstrap (the deployment tests build and run the image on a real Docker engine),
# nodejs (runs the HTTP demo page's script: tests/service/test_demo_page.py).
APT_PACKAGES = apertium apertium-eng-spa wordnet-base prometheus nginx docker.io debootstrap nodejs
SENTENCE ?= She is looking for a new job.

.PHONY: serve demo test apt venv install-dev lint

define apt_install
	SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	$$SUDO apt-get install -y -qq --no-install-recommends $(1) >/dev/null
endef

apt:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "apt-get install$$missing"; $(call apt_install,$$missing); fi

# Debian and Ubuntu ship venv's ensurepip in a package of its own (python3-venv).
$(PYTHON):
	@$(SYSTEM_PYTHON) -c "import ensurepip" 2>/dev/null || { \
	  echo "apt-get install python3-venv"; $(call apt_install,python3-venv); }
	$(SYSTEM_PYTHON) -m venv $(VENV)

venv: $(PYTHON)

install-dev: $(PYTHON)
	$(PYTHON) -m pip install -q -e '.[dev]'
	@# tests/deploy/test_k8s.py renders deploy/k8s with kustomize (kubectl kustomize)
	@command -v kubectl >/dev/null || command -v kustomize >/dev/null || test -x $(BIN)/kubectl || \
	  $(PYTHON) deploy/k8s/get_kubectl.py $(BIN)

serve: $(PYTHON)
	$(PYTHON) -m pip install -q -e '.[viz,eval]'
	@echo "serving gRPC on :50051 and HTTP/JSON on :8000; in another terminal: . $(VENV)/bin/activate && nmt-translate 'The house is old.'"
	$(BIN)/nmt-serve --providers cpu --http-port 8000

# Translate with the PyTorch checkpoint (no server, needs torch).
demo: $(PYTHON)
	$(PYTHON) -m pip install -q -e '.[train]'
	$(PYTHON) -m models.translate --beam 5 "$(SENTENCE)"

test: apt install-dev
	$(PYTHON) -m ruff check .
	PATH="$(BIN):$$PATH" $(PYTHON) -m pytest -q -p no:cacheprovider

lint: $(PYTHON)
	$(PYTHON) -m ruff check . && $(PYTHON) -m ruff format --check .
