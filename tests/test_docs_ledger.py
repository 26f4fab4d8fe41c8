"""The ledger, sealing, hooks, threat-model and architecture docs cannot drift from the code.

* Every reason code ``gitaudit/gate/`` can emit is in the reason-code table of
  ``docs/ledger-format.md``, with the verdict the code gives it.
* Every field a real run writes (``run.json``, step entries, check results, the tree layout, the
  commit trailers), every field of a real seal record and of ``status --json`` is documented.
* ``.pre-commit-hooks.yaml`` declares the two documented hooks, with entries that exist.
* Every ``tests/<file>::<test>`` the threat model cites exists, and every relative link between the
  docs points at an existing file and heading.
* Every control of the threat model, and every defence in its table of defences under mutation,
  cites a unit-level and a separate end-to-end test.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from gitaudit.crypto.signers import Ed25519Signer
from gitaudit.git.repo import Repo, open_repo
from gitaudit.ledger.plansref import SealRecord
from gitaudit.ledger.seals import seal_plan, trust_init
from gitaudit.plan.catalog import check_worktree
from gitaudit.run.recorder import run_plan
from tests.gitrepo import GitRepo, audit

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LEDGER_DOC = DOCS / "ledger-format.md"
THREAT_DOC = DOCS / "threat-model.md"
MANIFEST = ROOT / ".pre-commit-hooks.yaml"
MY_DOCS: tuple[str, ...] = (
    "ledger-format.md",
    "sealing.md",
    "threat-model.md",
    "hooks-and-servers.md",
)
MY_DOCS += ("architecture.md", "agent-hooks.md")

PLAN = {
    "task": "ship a greeting",
    "requirements": [
        {"id": "REQ-1", "description": "the greeting is built", "priority": "must"},
        {"id": "REQ-2", "description": "the greeting is read", "priority": "must"},
    ],
    "steps": [
        {
            "id": "build",
            "title": "build it",
            "depends_on": [],
            "covers": ["REQ-1"],
            "verify": [{"type": "run", "argv": ["sh", "-c", "echo built"]}],
            "outputs": [
                {"name": "greeting", "verify": [{"type": "file_exists", "path": "README.md"}]}
            ],
        },
        {
            "id": "read",
            "title": "read it",
            "depends_on": ["build"],
            "requires_outputs": [{"step": "build", "name": "greeting"}],
            "covers": ["REQ-2"],
            "artifacts": ["README.md"],
            "verify": [
                {"type": "run", "argv": ["cat", "README.md"]},
                {"type": "regex", "path": "README.md", "pattern": "sample"},
            ],
        },
    ],
}


# ------------------------------------------------------------------------------------ helpers


def section(text: str, heading: str) -> str:
    """The text under the markdown heading *heading* (``### `run.json```), up to the next heading
    of the same or a higher level."""
    match = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, re.MULTILINE)
    assert match, f"heading {heading!r} not found"
    level = len(match.group(1))
    rest = text[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.MULTILINE)
    return rest[: end.start()] if end else rest


def table_spans(text: str) -> set[str]:
    """Every `code span` inside a markdown table row of *text*."""
    spans: set[str] = set()
    for line in text.splitlines():
        if line.startswith("|"):
            spans.update(re.findall(r"`([^`]+)`", line))
    return spans


def field_names(doc: dict[str, Any], *, expand: bool = True) -> set[str]:
    """Top-level keys; dict-valued ones (except ``steps``) as ``key.sub``."""
    names: set[str] = set()
    for key, value in doc.items():
        if expand and isinstance(value, dict) and key != "steps":
            names.update(f"{key}.{sub}" for sub in value)
        else:
            names.add(key)
    return names


def build_ledger(repo: GitRepo) -> Repo:
    """A real repository with trust, a sealed plan and one real, signed run."""
    repo.write_plan(PLAN)
    repo.commit("plan")
    handle = open_repo(repo.path)
    signer = Ed25519Signer.generate("doc")
    trust_init(handle, signer, "doc")
    (checked,) = check_worktree(handle.require_workdir(), "default")
    seal_plan(handle, signer, checked, reason="docs")
    recorded = run_plan(handle, "default", signer)
    assert recorded.verdict == "PASS", recorded.doc["reasons"]
    return handle


# ------------------------------------------------------------------------------ reason codes


def _gate_reasons() -> dict[str, set[str]]:
    """code -> verdicts, for every ``Reason(...)`` in gitaudit/gate/ (f-string codes expanded)."""
    from gitaudit.verdict import PROVEN, StepStatus, Verdict

    sources = sorted((ROOT / "gitaudit" / "gate").glob("*.py"))
    expansions = {
        "step.": [s.value for s in StepStatus if s not in PROVEN],
        "evidence.": [v.lower() for v in Verdict if v != Verdict.PASS],
    }
    found: dict[str, set[str]] = {}
    nodes = [n for p in sources for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))]
    for node in nodes:
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Reason"):
            continue
        first = node.args[0]
        verdict_node = next((k.value for k in node.keywords if k.arg == "verdict"), None)
        if verdict_node is None and len(node.args) >= 5:
            verdict_node = node.args[4]
        verdict = "FAIL" if verdict_node is None else None
        if isinstance(verdict_node, ast.Constant):
            verdict = str(verdict_node.value)
        elif (
            isinstance(verdict_node, ast.Attribute)
            and isinstance(verdict_node.value, ast.Name)
            and verdict_node.value.id == "Verdict"
        ):
            verdict = Verdict[verdict_node.attr].value
        if isinstance(first, ast.Constant):
            codes = [str(first.value)]
        else:
            assert isinstance(first, ast.JoinedStr), ast.dump(first)
            prefix = first.values[0]
            assert isinstance(prefix, ast.Constant), ast.unparse(first)
            assert prefix.value in expansions, (
                f"gate.py line {node.lineno}: new computed reason code {ast.unparse(first)}; "
                "document it in docs/ledger-format.md and teach this test its values"
            )
            codes = [f"{prefix.value}{v}" for v in expansions[str(prefix.value)]]
        for code in codes:
            found.setdefault(code, set())
            if verdict is not None:
                found[code].add(verdict)
    return found


def test_every_gate_reason_code_is_in_the_table_with_its_verdict() -> None:
    table = section(LEDGER_DOC.read_text(encoding="utf-8"), "Reason codes")
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| `") and len(cells) >= 3:
            rows[cells[0].strip("`")] = cells[1]
    codes = _gate_reasons()
    assert len(codes) >= 25, sorted(codes)
    missing = sorted(set(codes) - set(rows))
    assert not missing, f"reason codes missing from docs/ledger-format.md: {missing}"
    for code, verdicts in codes.items():
        for verdict in verdicts:
            assert verdict in rows[code], f"{code}: gate.py gives {verdict}, the doc {rows[code]}"


# ------------------------------------------------------------------------------- a real run


def test_every_run_field_and_path_is_documented(repo: GitRepo) -> None:
    build_ledger(repo)
    doc = json.loads(repo.git("show", "refs/audit/runs/default:run.json"))
    text = LEDGER_DOC.read_text(encoding="utf-8")

    documented = table_spans(section(text, "`run.json`"))
    missing = sorted(field_names(doc) - documented)
    assert not missing, f"run.json fields missing from the run.json table: {missing}"

    steps = section(text, "Step entries")
    step_keys = {k for entry in doc["steps"].values() for k in entry}
    missing = sorted(step_keys - table_spans(steps))
    assert not missing, f"step-entry fields missing: {missing}"
    artifacts = doc["steps"]["read"]["artifacts"]
    assert artifacts and artifacts[0]["stored"], artifacts
    assert all(f"`{k}`" in steps for k in artifacts[0]), sorted(artifacts[0])
    upstream = doc["steps"]["read"]["upstream"]
    assert upstream, "the plan's upstream re-check did not run"
    assert all(f"`{k}`" in steps for k in upstream[0]), sorted(upstream[0])

    results = [
        r
        for entry in doc["steps"].values()
        for r in (
            *entry["checks"],
            *(c for cs in entry["outputs"].values() for c in cs),
            *(c for u in entry["upstream"] for c in u["checks"]),
        )
    ]
    result_keys = {k for r in results for k in r}
    missing = sorted(result_keys - table_spans(section(text, "Check results (`result.json`)")))
    assert not missing, f"check result fields missing: {missing}"
    assert {r["type"] for r in results} == {"run", "file_exists", "regex"}

    layouts = {
        "steps/<id>/result.json": r"steps/[^/]+/result\.json",
        "steps/<id>/checks/<n>/": r"steps/[^/]+/checks/\d+/(result\.json|stdout|stderr)",
        "steps/<id>/outputs/<output>/<n>/": r"steps/[^/]+/outputs/[^/]+/\d+/"
        r"(result\.json|stdout|stderr)",
        "steps/<id>/upstream/<step>/<output>/<n>/": r"steps/[^/]+/upstream/[^/]+/[^/]+/\d+/"
        r"(result\.json|stdout|stderr)",
        "steps/<id>/artifacts/<path>": r"steps/[^/]+/artifacts/.+",
        "run.json": r"run\.json",
        "summary.md": r"summary\.md",
    }
    tree = section(text, "The run tree (`refs/audit/runs/<plan>`)")
    for documented_path in layouts:
        assert f"`{documented_path}`" in tree, documented_path
    paths = repo.git("ls-tree", "-r", "--name-only", "refs/audit/runs/default").split()
    for path in paths:
        assert any(re.fullmatch(p, path) for p in layouts.values()), f"undocumented path {path}"
    assert any("/upstream/" in p for p in paths) and any("/outputs/" in p for p in paths)
    assert "steps/read/artifacts/README.md" in paths

    message = repo.git("log", "-1", "--format=%B", "refs/audit/runs/default")
    trailers = re.findall(r"^(Audit-[A-Za-z-]+):", message, re.MULTILINE)
    assert trailers
    commits = section(text, "Commit messages and trailers")
    assert all(f"`{t}`" in commits for t in trailers), trailers


def test_every_seal_record_field_is_documented(repo: GitRepo) -> None:
    build_ledger(repo)
    stored = json.loads(repo.git("show", "refs/audit/plans:seals/default.json"))
    record = SealRecord.from_json(stored, "seals/default.json")
    assert record.to_json() == stored
    text = LEDGER_DOC.read_text(encoding="utf-8")
    documented = table_spans(section(text, "`seals/<name>.json`"))
    missing = sorted(field_names(record.to_json()) - documented)
    assert not missing, f"seal-record fields missing from docs/ledger-format.md: {missing}"
    message = repo.git("log", "-1", "--format=%B", "refs/audit/plans")
    trailers = re.findall(r"^(Audit-[A-Za-z-]+):", message, re.MULTILINE)
    commits = section(text, "Commit messages and trailers")
    assert {"Audit-Seal-Version", "Audit-Weakened"} <= set(trailers)
    assert all(f"`{t}`" in commits for t in trailers), trailers
    policy = json.loads(repo.git("show", "refs/audit/plans:policy.json"))
    assert set(policy) <= table_spans(section(text, "`policy.json`"))


def test_status_json_shape_is_documented(repo: GitRepo) -> None:
    build_ledger(repo)
    repo.write("new.txt", "no evidence for this tree yet\n")
    result = audit(repo.path, "status", "--json")
    assert result.code == 3, result.out + result.err
    status = result.json()
    plan = status["plans"][0]
    reason = plan["reasons"][0]
    spans = table_spans(section(LEDGER_DOC.read_text(encoding="utf-8"), "`status --json`"))
    tails = {s.rsplit(".", 1)[-1].removesuffix("[]") for s in spans}
    for key in (*status, *plan, *reason):
        assert key in tails, f"status --json key {key!r} is not documented"
    assert reason["code"] in _gate_reasons()


# ------------------------------------------------------------------------- pre-commit hooks


def _manifest_hooks(text: str) -> dict[str, dict[str, str]]:
    """A hand parse of the flat manifest format this file uses (no YAML library needed)."""
    hooks: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    key = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.startswith("- "):
            current = {}
            line = "  " + line[2:]
        assert current is not None, f"manifest line outside a hook: {line!r}"
        match = re.fullmatch(r"  ([a-z_]+):\s*(.*)", line)
        if match:
            key, value = match.groups()
            current[key] = value
            if key == "id":
                hooks[value] = current
        else:
            assert key is not None and line.startswith("    "), f"unexpected line: {line!r}"
            current[key] = (current[key] + " " + line.strip()).strip()
    return hooks


def test_pre_commit_manifest_declares_both_hooks() -> None:
    text = MANIFEST.read_text(encoding="utf-8")
    hooks = _manifest_hooks(text)
    assert set(hooks) == {"gitaudit-pre-push", "gitaudit-commit-msg"}
    push, msg = hooks["gitaudit-pre-push"], hooks["gitaudit-commit-msg"]
    assert push["stages"] == "[pre-push]" and msg["stages"] == "[commit-msg]"
    assert push["language"] == msg["language"] == "python"
    assert push["pass_filenames"] == "false" and push["always_run"] == "true"
    assert push["entry"] == "python -P -m gitaudit.hooks pre-commit-push"
    assert msg["entry"] == "python -P -m gitaudit.hooks commit-msg"
    from gitaudit.hooks.entry import HANDLERS

    assert "commit-msg" in HANDLERS and "pre-commit-push" in HANDLERS
    try:
        import yaml
    except ImportError:
        return
    parsed = yaml.safe_load(text)
    assert [h["id"] for h in parsed] == list(hooks)
    assert parsed[0]["stages"] == ["pre-push"] and parsed[0]["pass_filenames"] is False


# ----------------------------------------------------------------------- threat-model tests


def test_threat_model_cites_existing_tests() -> None:
    text = THREAT_DOC.read_text(encoding="utf-8")
    refs = set(re.findall(r"(tests/[\w/]+\.py)::(test_\w+)", text))
    assert len(refs) >= 77, len(refs)
    attacks = {name for path, name in refs if path.startswith("tests/adversarial/")}
    assert len(attacks) >= 40, "the catalogue names at least 40 distinct attacks"
    for path, name in sorted(refs):
        file = ROOT / path
        assert file.is_file(), f"{path} (cited as {path}::{name}) does not exist"
        assert re.search(rf"^\s*def {name}\(", file.read_text(encoding="utf-8"), re.MULTILINE), (
            f"{path} has no test {name}"
        )


def test_every_attack_of_the_catalogue_is_in_the_threat_model() -> None:
    """A test added to tests/adversarial/ is an attack: the catalogue must name it."""
    text = THREAT_DOC.read_text(encoding="utf-8")
    cited = set(re.findall(r"tests/adversarial/[\w/]+\.py::(test_\w+)", text))
    missing = []
    for path in sorted((ROOT / "tests" / "adversarial").glob("test_*.py")):
        for name in re.findall(r"^def (test_\w+)\(", path.read_text(encoding="utf-8"), re.M):
            if name not in cited:
                missing.append(f"{path.name}::{name}")
    assert not missing, f"attacks missing from docs/threat-model.md: {missing}"
    count = re.search(r"`tests/adversarial/` tries (\d+) tests", text)
    assert count is not None and int(count.group(1)) == len(cited), (count, len(cited))


def _catalogue_kinds(text: str) -> dict[str, set[str]]:
    """The adversarial tests the threat model cites, by kind: a **limit** is stated as one (its
    catalogue row starts with KNOWN LIMIT: the test shows how far the attack gets), a
    **control** shows what must keep working (its row starts with Control:, or the test is not
    named test_attack_*), every other test is an **attack** that is caught."""
    cited = set(re.findall(r"tests/adversarial/[\w/]+\.py::(test_\w+)", text))
    rows = re.findall(r"^\| (.+?) \| `tests/adversarial/[\w/]+\.py::(test_\w+)` \|$", text, re.M)
    limits = {name for first, name in rows if first.startswith("KNOWN LIMIT")}
    controls = {name for first, name in rows if first.startswith("Control")}
    controls |= {name for name in cited if not name.startswith("test_attack_")}
    return {"limit": limits, "control": controls - limits, "attack": cited - limits - controls}


def test_the_catalogue_counts_attacks_limits_and_controls_apart() -> None:
    """ "All caught" is said of the attacks only: a known limit is stated as a limit, and a
    control (an honest use that must keep working) is not an attack."""
    text = THREAT_DOC.read_text(encoding="utf-8")
    kinds = _catalogue_kinds(text)
    stated = re.search(
        r"(\d+) attacks,\s+all\s+caught;\s+(\d+)\s+known\s+limits?,\s+stated\s+as\s+such;\s+"
        r"(\d+)\s+controls",
        text,
    )
    assert stated is not None, "the catalogue states its attacks, limits and controls apart"
    got = tuple(int(n) for n in stated.groups())
    want = (len(kinds["attack"]), len(kinds["limit"]), len(kinds["control"]))
    assert got == want, (got, want)
    status = re.search(r"\*\*Status: .*?\((\d+) attacks, all caught", text, re.S)
    assert status is not None and int(status.group(1)) == want[0]


CITATION = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)(?:\[([^\]`]+)\])?`")
END_TO_END = ("tests/e2e/", "tests/adversarial/", "tests/cli/")


def _defence_rows(text: str) -> list[list[str]]:
    """The rows of the table of defences under mutation (defence, mutation, unit, end to end)."""
    lines = section(text, "Defences under mutation").splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("| defence |"))
    header = [c.strip() for c in lines[start].strip().strip("|").split("|")]
    assert header == ["defence", "mutation (removed)", "unit", "end to end"], header
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def _cited_test_exists(path: str, name: str, param: str | None) -> None:
    file = ROOT / path
    assert file.is_file(), f"{path} does not exist"
    assert re.search(rf"^\s*def {name}\(", file.read_text(encoding="utf-8"), re.M), (
        f"{path} has no test {name}"
    )
    if param is None:
        return
    module = __import__(path.removesuffix(".py").replace("/", "."), fromlist=[name])
    marks = [m for m in getattr(getattr(module, name), "pytestmark", []) if m.name == "parametrize"]
    ids = {str(v) for m in marks for v in m.args[1]}
    assert param in ids, f"{path}::{name} has no case [{param}] (it has {sorted(ids)})"


def test_every_defence_under_mutation_has_a_unit_and_an_end_to_end_test() -> None:
    """Each defence in the table is caught by two independent tests, both of which fail when it
    is removed: one at the unit level, one end to end (the command line, a hook, the server)."""
    rows = _defence_rows(THREAT_DOC.read_text(encoding="utf-8"))
    assert len(rows) >= 10, rows
    for defence, mutation, unit, end in rows:
        assert "`" in mutation, f"{defence}: name the mutation"
        units = CITATION.findall(unit)
        ends = CITATION.findall(end)
        assert units, f"{defence}: no unit-level test cited"
        assert ends, f"{defence}: no end-to-end test cited"
        for path, name, param in units + ends:
            _cited_test_exists(path, name, param or None)
        assert not {(p, n) for p, n, _ in units} & {(p, n) for p, n, _ in ends}, (
            f"{defence}: the unit and end-to-end tests must be different tests"
        )
        for path, name, _ in units:
            assert not path.startswith(END_TO_END), f"{defence}: {path}::{name} is not a unit test"
        for path, name, _ in ends:
            assert path.startswith(END_TO_END), f"{defence}: {path}::{name} is not end to end"


def _control_claims(text: str) -> list[tuple[str, str]]:
    """(subsection, text) of every claim of the Controls section that cites tests: each bullet,
    and each paragraph outside bullets, except those that say what is out of scope."""
    claims: list[tuple[str, str]] = []
    heading, lines = "", list[str]()
    for line in [*section(text, "Controls").splitlines(), ""]:
        if line.startswith("### ") or line.startswith("- ") or not line.strip():
            block = "\n".join(lines)
            if CITATION.search(block) and not block.startswith("Out of scope"):
                claims.append((heading, block))
            lines = [line] if line.startswith("- ") else []
            heading = line[4:] if line.startswith("### ") else heading
        else:
            lines.append(line)
    return claims


def test_every_control_is_caught_by_a_unit_and_an_end_to_end_test() -> None:
    """Each defence the Controls section names cites at least two independent tests: one at the
    unit level (the function itself) and one end to end (the command line, a hook, the server);
    every cited test exists."""
    claims = _control_claims(THREAT_DOC.read_text(encoding="utf-8"))
    assert len(claims) >= 50, len(claims)
    for heading, block in claims:
        cited = CITATION.findall(block)
        for path, name, param in cited:
            _cited_test_exists(path, name, param or None)
        first = block.splitlines()[0][:70]
        assert any(not p.startswith(END_TO_END) for p, _, _ in cited), (
            f"{heading}: {first!r} cites no unit-level test"
        )
        assert any(p.startswith(END_TO_END) for p, _, _ in cited), (
            f"{heading}: {first!r} cites no end-to-end test"
        )


def test_make_mutate_defences_removes_each_defence_the_table_names() -> None:
    """``mutation/defences.py`` removes each defence of the table and runs the tests cited for
    it: the same defences, and the same tests, as the table."""
    from mutation.defences import DEFENCES

    rows = _defence_rows(THREAT_DOC.read_text(encoding="utf-8"))
    cited = {}
    for defence, _, unit, end in rows:
        tests = [f"{p}::{n}" + (f"[{c}]" if c else "") for p, n, c in CITATION.findall(unit + end)]
        cited[defence] = tuple(tests)
    assert cited == {d.name: d.tests for d in DEFENCES}


# ------------------------------------------------------------------------------ cross-links


def _anchor(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("name", MY_DOCS)
def test_relative_links_point_at_existing_files_and_headings(name: str) -> None:
    text = (DOCS / name).read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    for link in links:
        if re.match(r"[a-z]+://", link):
            continue
        target, _, anchor = link.partition("#")
        file = DOCS / target if target else DOCS / name
        assert file.is_file(), f"{name}: link to missing file {link}"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", file.read_text(encoding="utf-8"), re.MULTILINE)
            assert anchor in {_anchor(h) for h in headings}, f"{name}: dangling anchor {link}"


def test_make_mutate_reads_every_listed_survivor_of_the_threat_model() -> None:
    """``make mutate`` counts a survivor as accounted for only when the threat model lists it,
    with why it is equivalent or harmless: every row of that table must be one it can read, as a
    mutant of a module some group mutates."""
    from mutation.run import GROUPS, listed_equivalents, module_of

    text = section(THREAT_DOC.read_text(encoding="utf-8"), "Defences under mutation")
    lines = text.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("| module | survivor"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    names = listed_equivalents("\n".join(rows))
    assert rows and len(names) == len(rows), (len(rows), sorted(names))
    mutated = {m for group in GROUPS.values() for m in group.modules}
    for name in names:
        assert module_of(name) in mutated, name
        assert re.fullmatch(r"gitaudit(\.\w+)+\.(x_\w+|xǁ\w+ǁ\w+)__mutmut_\d+", name), name
