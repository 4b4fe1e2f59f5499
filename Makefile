# Two commands do everything on a fresh machine: `make demo` and `make test`.
# TORCH_BUILD picks the PyTorch build and its environment (README, "CI and GPU runners"):
#   cpu  (default) .venv       torch==2.13.0 as pip resolves it here: the CPU build
#   cuda           .venv-cuda  PyPI's default Linux wheel, the CUDA build (runs on machines without a GPU too)
PYTHON ?= python3.11
TORCH_BUILD ?= cpu
# PYTEST_ARGS: more arguments for `make test`'s pytest (.ci/run deselects the build-independent tests in its second run)
PYTEST_ARGS ?=
ifeq ($(TORCH_BUILD),cuda)
VENV := .venv-cuda
# --isolated: pip ignores this machine's configuration, whose local folder holds the `+cpu` wheel that
# pip would otherwise prefer (a local version label sorts above plain 2.13.0).
TORCH ?= --isolated torch==2.13.0
else ifeq ($(TORCH_BUILD),cpu)
VENV := .venv
TORCH ?= torch==2.13.0
else
$(error TORCH_BUILD must be cpu or cuda, not "$(TORCH_BUILD)")
endif
# The suite asserts that it runs under this build (tests/unit/test_project.py), so no silent fallback.
export COURSE_TORCH_BUILD := $(TORCH_BUILD)
define CHECK_BUILD
import sys, torch
build = "cuda" if torch.version.cuda else "cpu"
if build != sys.argv[1]:
    sys.exit(f"pip installed torch {torch.__version__}, the {build} build, but TORCH_BUILD={sys.argv[1]}\n"
             f"pip 安装的是 torch {torch.__version__}（{build} 版本），但 TORCH_BUILD={sys.argv[1]}")
endef
export CHECK_BUILD
BIN := $(CURDIR)/$(VENV)/bin
# `make gpu-check` looks for the machine's own Python on the PATH make was started with, not on the one below
MACHINE_PATH := $(PATH)
export PATH := $(BIN):$(PATH)
ASSIGNMENTS := a1_tensor_to a2_module_to a3_precision_transfers a4_several_devices
LESSONS := $(wildcard notebooks/*.ipynb)
SOURCES := $(foreach a,$(ASSIGNMENTS),source/$(a)/$(a).ipynb)

.PHONY: install torch test test-fast browser bubblewrap proxy demo report lab notebooks figures messages release shared-install student-bundle clean

$(VENV)/.torch: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check $(TORCH)
	$(BIN)/python -W ignore -c "$$CHECK_BUILD" $(TORCH_BUILD)
	touch $@

$(VENV)/.installed: $(VENV)/.torch
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[test]"
	touch $@

install: $(VENV)/.installed

# PyTorch alone, in its build's environment: .ci/run installs the CUDA build's (gigabytes of wheels to unpack) while the
# rest is set up; the rest of an environment installs the course itself (`pip install -e .`), one pip at a time
torch: $(VENV)/.torch

test: install browser bubblewrap proxy postgresql slurm  ## the whole suite: unit tests, grading pipeline, browser test, nbval over lessons and solutions
	$(BIN)/pytest --durations=30 $(PYTEST_ARGS)

test-fast: install  ## the unit tests alone (tests/unit/, marked unit): each part on its own, no class graded, in under a minute
	$(BIN)/pytest -n auto tests/unit

browser:  ## Debian's Chromium and a CJK font for the browser test (root + apt-get), unless COURSE_CHROMIUM names one
	@[ -n "$$COURSE_CHROMIUM" ] || command -v chromium >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-zenhei; } || \
	  { echo "Chromium is not installed: install it (Debian/Ubuntu: apt-get install chromium) for the browser test."; \
	    echo "未安装 Chromium：请安装它（Debian/Ubuntu：apt-get install chromium），浏览器测试需要它。"; }

# JupyterHub's proxy (tests/system/test_jupyterhub.py, deploy/jupyterhub/) comes from npm, into build/node/.
CHP := build/node/node_modules/.bin/configurable-http-proxy
proxy:  ## configurable-http-proxy for the JupyterHub test, with npm into build/node (unless on PATH)
	@command -v configurable-http-proxy >/dev/null 2>&1 || [ -x $(CHP) ] || \
	  { command -v npm >/dev/null 2>&1 && npm install --silent --no-audit --no-fund --prefix build/node configurable-http-proxy@4; } || \
	  { echo "configurable-http-proxy is not installed: install Node.js and npm, then: npm install --prefix build/node configurable-http-proxy"; \
	    echo "未安装 configurable-http-proxy：请安装 Node.js 和 npm，然后运行：npm install --prefix build/node configurable-http-proxy"; }

.PHONY: postgresql slurm
# apt-get waits for another apt-get (two `make test` side by side) instead of failing on the dpkg lock
APT := DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600

postgresql:  ## Debian's PostgreSQL server for tests/system/test_postgres.py (README, "Beyond one machine"; root + apt-get)
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || command -v pg_ctl >/dev/null 2>&1 || \
	  { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && $(APT) update -qq && $(APT) install -y -qq postgresql; } || \
	  { echo "PostgreSQL is not installed: install it (Debian/Ubuntu: apt-get install postgresql) for tests/system/test_postgres.py."; \
	    echo "未安装 PostgreSQL：请安装它（Debian/Ubuntu：apt-get install postgresql），tests/system/test_postgres.py 需要它。"; }

slurm:  ## Debian's Slurm and MUNGE, for the one-node cluster of tests/system/test_postgres.py (root + apt-get)
	@{ command -v slurmctld && command -v slurmd && command -v munged; } >/dev/null 2>&1 || \
	  { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && $(APT) update -qq && \
	    $(APT) install -y -qq --no-install-recommends slurm-wlm munge; } || \
	  { echo "Slurm is not installed: install it (Debian/Ubuntu: apt-get install slurm-wlm munge) for the Slurm test."; \
	    echo "未安装 Slurm：请安装它（Debian/Ubuntu：apt-get install slurm-wlm munge），Slurm 测试需要它。"; }

bubblewrap:  ## the sandbox of every grading kernel (README, "Threat model"): Debian's bubblewrap (root + apt-get)
	@command -v bwrap >/dev/null 2>&1 || [ -n "$$COURSE_BWRAP" ] || { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap; } || \
	  { echo "bubblewrap is not installed: install it (Debian/Ubuntu: apt-get install bubblewrap); grading refuses to run without it."; \
	    echo "未安装 bubblewrap：请安装它（Debian/Ubuntu：apt-get install bubblewrap）；没有它，评分程序拒绝运行。"; }

demo: install bubblewrap  ## grade the bundled demo class of every assignment with plain nbgrader commands
	for a in $(ASSIGNMENTS); do $(BIN)/course demo --root build/demo/$$a --assignment $$a || exit 1; done

report: install  ## what the graders catch, answer by answer, for every assignment
	for a in $(ASSIGNMENTS); do $(BIN)/course report --root build/demo/$$a --assignment $$a --reuse || exit 1; done

# `make lab PORT=8889 IP=0.0.0.0 BROWSER=no`: another port, listen on every interface, open no browser
PORT ?= 8888
IP ?= localhost
lab: install  ## JupyterLab (students; instructors also reach the formgrader from it)
	$(BIN)/jupyter lab --ServerApp.port=$(PORT) --ServerApp.ip=$(IP) $(if $(filter no 0 false,$(BROWSER)),--no-browser) \
	  $(if $(filter 0,$(shell id -u)),--allow-root)

# coalesce_streams: a cell's printed lines are stored as one output however the kernel flushed them (on a
# loaded machine a line can arrive in pieces), so re-running a notebook changes only what its cells print
notebooks: install  ## re-run lessons and solutions top to bottom, storing their outputs
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.record_timing=False \
	  --ExecutePreprocessor.coalesce_streams=True $(LESSONS) $(SOURCES)
	$(MAKE) release

figures: install  ## draw the lessons' figures (notebooks/figures/fig_*.py) into SVG; tests/unit/test_figures.py compares
	$(BIN)/python notebooks/figures/draw.py

messages: install  ## messages.json's 繁體 forms (zh-hant) from its 简体 ones, after editing a zh (tests/unit/test_messages.py checks)
	$(BIN)/python -m course.authoring.monolingual

release: install  ## regenerate release/ from source/ with nbgrader (its gradebook kept out of the root)
	mkdir -p build
	for a in $(ASSIGNMENTS); do \
	  $(BIN)/nbgrader generate_assignment $$a --force --CourseDirectory.db_url=sqlite:///build/release-gradebook.db || exit 1; \
	done

PREFIX ?= /opt/torch-to
shared-install:  ## as root: the course's environment for every user of a shared machine, into PREFIX (not editable)
	deploy/exchange/install-shared.sh "$(PREFIX)" $(TORCH)

student-bundle: install  ## what students install, without solutions or hidden tests: build/student-bundle/ and .tar.gz
	$(BIN)/python -m course.authoring.student_bundle build/student-bundle

# Only what make built. The course folder's class (gradebook.db, submitted/, autograded/, feedback/, logs/)
# is the instructor's record of a term: no target deletes it (README, "Instructors").
clean:  ## remove build/ (the demo classes, the student bundle, test artefacts); never a gradebook or a submission
	rm -rf build

# The whole course on this machine's GPU with the PyTorch it already has (never replaced), in under 10 minutes
# on one GPU and 16 cores (README, "CI and GPU runners"). GPU_PYTHON: the Python whose torch to use;
# WHEELS: a folder of wheels to install the course's other dependencies from, offline.
GPU_PYTHON ?= python3
.PHONY: gpu-check
gpu-check: bubblewrap  ## the course proven on this machine's GPU with its own PyTorch: one table, build/gpu-check/gpu-check.json
	env PATH="$(MACHINE_PATH)" $(GPU_PYTHON) tests/gpu_check.py $(if $(WHEELS),--wheels "$(WHEELS)")

.PHONY: mutation
# MUTANTS: mutmut's names or patterns of the mutants to run (default: all of [tool.mutmut] in pyproject.toml), e.g.
#   make mutation MUTANTS='autograder.verdict.*'    make mutation MUTANTS='course.kernels.sandbox.xǁKernelSandboxǁarguments*'
MUTANTS ?=
mutation: install  ## mutation testing (mutmut) of the checks and the security code against the fast unit tests; lists surviving mutants
	test -x $(BIN)/mutmut || $(BIN)/pip install --quiet --disable-pip-version-check "mutmut>=3.8,<4"
	rm -rf build/mutation && mkdir -p build/mutation
	cp -R pyproject.toml nbgrader_config.py autograder course tests source build/mutation/
	cd build/mutation && $(BIN)/mutmut run --max-children 1 $(MUTANTS) && $(BIN)/mutmut results
