# gitaudit — the two set-up commands: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-test
BASE   := $(VENV)/.installed

.PHONY: test quick demo lint typecheck pytest pytest-quick venv manpage bench bench-anchors clean fuzz dist mutate mutate-defences

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP) $(BASE)

$(BASE): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e .
	touch $(BASE)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check gitaudit tests benchmarks hooks fuzz mutation
	$(BIN)/ruff format --check gitaudit tests benchmarks fuzz mutation

typecheck: $(STAMP)
	$(BIN)/mypy

# pytest exits 5 when it collected nothing: that is a failure here, never a pass.
pytest: $(STAMP)
	@$(BIN)/python -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

test: lint typecheck pytest

# The edit-test loop: `make test` less the slow fault and load tests (tests/faults/ and anything
# marked slow). CI runs `make test`.
pytest-quick: $(STAMP)
	@$(BIN)/python -m pytest --ignore=tests/faults -m "not slow"; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make quick: pytest collected no tests" >&2; exit 1; fi; exit $$rc

quick: lint typecheck pytest-quick

demo: $(BASE)
	$(BIN)/python -m gitaudit.demo

manpage: $(STAMP)
	$(BIN)/python -m gitaudit.cli.manpage > man/git-audit.1
	$(BIN)/python -m gitaudit.cli.manpage --help-text > gitaudit/cli/helptext.py

# Every benchmark runs and prints all its rows; the target fails at the end when any missed.
# GITAUDIT_BENCH_QUICK=1 makes the fixtures smaller (a quick look, not the judged sizes).
bench: $(STAMP)
	@failed=""; for b in benchmarks/bench_*.py; do echo "== $$b"; \
		$(BIN)/python $$b || failed="$$failed $$(basename $$b .py)"; echo; done; \
	if [ -n "$$failed" ]; then echo "make bench: targets missed in:$$failed" >&2; exit 1; fi; \
	echo "make bench: every target met"

# Side-by-side anchors (optional): in-toto-run and plan-auditor, in their own virtual environment.
ANCHORS ?= .venv-anchors

$(ANCHORS)/bin/python:
	$(PYTHON) -m venv $(ANCHORS)

$(ANCHORS)/.installed: $(ANCHORS)/bin/python
	$(ANCHORS)/bin/python -m pip install -q 'in-toto==3.0.0' 'plan-auditor==2.6.3'
	touch $@

bench-anchors: $(STAMP) $(ANCHORS)/.installed
	$(BIN)/python benchmarks/anchors.py --anchors $(ANCHORS)

clean:
	rm -rf $(VENV) $(ANCHORS) build dist *.egg-info

# Fuzz every harness in fuzz/ for FUZZ_SECONDS each: atheris/libFuzzer when atheris installs,
# else the harnesses' pure-Python fallback driver. Fails when a harness crashed or hung.
FUZZ_SECONDS ?= 60

fuzz: $(STAMP)
	@$(BIN)/python -c "import atheris" 2>/dev/null || $(BIN)/python -m pip install -q atheris \
		|| echo "make fuzz: atheris unavailable here; using the pure-Python fallback driver" >&2
	@rc=0; for h in plan signature gate ledger hooks; do \
		$(BIN)/python fuzz/run.py $$h $(FUZZ_SECONDS) || rc=1; \
	done; exit $$rc

# The source distribution and the wheel, versioned from git tags (hatch-vcs), into dist/.
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

# Mutation testing of the security-critical modules (mutmut 3, installed on demand): a seeded
# sample of MUTATE_SAMPLE mutants per module (0: all of them), against each group's tests; or only
# MUTATE_MODULES (comma-separated paths). Prints the score per module and every surviving mutant;
# fails when a group has less than 90% of its sample killed or listed (with why it is equivalent
# or harmless) in docs/threat-model.md. mutate-defences removes each defence the threat model names and checks
# that the tests it cites fail. See docs/threat-model.md.
MUTATE_SAMPLE  ?= 25
MUTATE_SEED    ?= 18
MUTATE_GROUPS  ?= gate,ledger,crypto,hooks,fingerprint,runner
MUTATE_MODULES ?=

mutate: $(STAMP)
	$(BIN)/python mutation/run.py --groups $(MUTATE_GROUPS) --sample $(MUTATE_SAMPLE) \
	  --seed $(MUTATE_SEED) --modules "$(MUTATE_MODULES)"

mutate-defences: $(STAMP)
	$(BIN)/python mutation/defences.py
