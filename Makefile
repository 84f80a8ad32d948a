# Two commands for a fresh Debian machine (run as root, or with sudo for apt-get):
#   make serve  installs the serving package (no torch) and serves the committed demo model
#   make test   installs everything the tests need and runs the whole suite
PYTHON ?= python3
APT_PACKAGES = apertium apertium-eng-spa wordnet-base prometheus nginx
SENTENCE ?= The cat sat on the mat.
# Debian 12 and Ubuntu 24.04 mark their system Python "externally managed" (PEP 668) and
# pip refuses to install into it; these commands install into whichever python3 runs
# them, on purpose (a dedicated machine or image). For isolation run them with
# PYTHON=.venv/bin/python after `python3 -m venv .venv`.
export PIP_BREAK_SYSTEM_PACKAGES = 1

.PHONY: serve demo test apt pip install-dev lint

apt:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# A Debian/Ubuntu system Python comes without pip until python3-pip is installed.
pip:
	@$(PYTHON) -m pip --version >/dev/null 2>&1 || { \
	  echo "apt-get install python3-pip"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq python3-pip >/dev/null; }

install-dev: pip
	$(PYTHON) -m pip install -q -e '.[dev]'

serve: pip
	$(PYTHON) -m pip install -q -e '.[viz]'
	nmt-serve --providers cpu

# Translate with the PyTorch checkpoint (no server, needs torch).
demo:
	$(PYTHON) -m pip install -q -e '.[train]'
	$(PYTHON) -m models.translate --beam 5 "$(SENTENCE)"

test: apt install-dev
	$(PYTHON) -m ruff check .
	$(PYTHON) -m pytest -q -p no:cacheprovider

lint:
	$(PYTHON) -m ruff check . && $(PYTHON) -m ruff format --check .
