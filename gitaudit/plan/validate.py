"""Layers 3-5 of validation: semantics (ids, graph, output contracts, coverage), legacy rules,
and the environment. Every violation is reported, each with a stable code and a fix.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from collections.abc import Iterator

from gitaudit.plan.exposure import forbidden
from gitaudit.plan.graph import adjacency, find_cycles
from gitaudit.plan.load import load_plan
from gitaudit.plan.model import Check, Plan, Step
from gitaudit.plan.paths import check_relative_spec
from gitaudit.plan.problems import Problem, Severity, ValidationReport


class _Collector:
    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.problems: list[Problem] = []

    def add(
        self, path: str, code: str, message: str, hint: str, severity: Severity = "error"
    ) -> None:
        self.problems.append(
            Problem(self.plan.name, self.plan.source, path, code, message, hint, severity)
        )


def semantic_problems(plan: Plan) -> list[Problem]:
    """Layer 3 (and the legacy rules of layer 4): everything the schema cannot express."""
    out = _Collector(plan)
    _ids(plan, out)
    _requirements(plan, out)
    known: dict[str, Step] = {}
    for s in plan.steps:
        known.setdefault(s.id, s)
    for step in plan.steps:
        _dependencies(plan, step, known, out)
        _checks(step, out)
        _exposure(step.json_path, step.pass_env, step.ignored_paths, out)
    _exposure("$", plan.pass_env, plan.ignored_paths, out)
    _cycles(plan, out)
    return out.problems


def _exposure(
    where: str, pass_env: tuple[str, ...], ignored_paths: tuple[str, ...], out: _Collector
) -> None:
    """What a plan lets checks read beyond the tree: never the signing material, and only paths
    inside the repository."""
    for i, name in enumerate(pass_env):
        if forbidden(name):
            out.add(
                f"{where}.pass_env[{i}]",
                "env.forbidden",
                f"{name!r} would pass GITAUDIT_* or SSH_AUTH_SOCK to checks: a check could sign "
                "evidence or read gitaudit's keys",
                "name the variables the checks need, not these",
            )
    for i, path in enumerate(ignored_paths):
        message = check_relative_spec(path)
        if message:
            out.add(
                f"{where}.ignored_paths[{i}]",
                "path.escapes-workspace",
                f"ignored path {path!r}: {message}",
                "use a path relative to the repository root, without '..'",
            )
        elif path.strip("/") in ("", ".", ".git") or path.startswith(".git/"):
            out.add(
                f"{where}.ignored_paths[{i}]",
                "path.not-ignorable",
                f"ignored path {path!r} is the repository itself or its git directory",
                "declare the ignored folder the checks need (e.g. .venv)",
            )


def environment_problems(plan: Plan) -> list[Problem]:
    """Layer 5: required tools missing from PATH. A problem of this machine, not of the plan."""
    out = _Collector(plan)
    for i, tool in enumerate(plan.required_tools):
        if shutil.which(tool) is None:
            out.add(
                f"$.required_tools[{i}]",
                "env.missing-tool",
                f"required tool {tool!r} is not on PATH",
                f"install {tool!r} or add it to PATH; the gate cannot PASS without it",
                "environment",
            )
    return out.problems


def _ids(plan: Plan, out: _Collector) -> None:
    counts = Counter(s.id for s in plan.steps)
    for step in plan.steps:
        if counts[step.id] > 1:
            first = next(s for s in plan.steps if s.id == step.id)
            if first is not step:
                out.add(
                    f"{step.json_path}.id",
                    "step.duplicate-id",
                    f"step id {step.raw_id!r} is already used by $.steps[{first.index}]",
                    "give every step a unique id",
                )
    req_counts = Counter(r.id for r in plan.requirements)
    seen: set[str] = set()
    for i, req in enumerate(plan.requirements):
        if req_counts[req.id] > 1 and req.id in seen:
            out.add(
                f"$.requirements[{i}].id",
                "requirement.duplicate-id",
                f"requirement id {req.id!r} appears more than once",
                "give every requirement a unique id",
            )
        seen.add(req.id)


def _requirements(plan: Plan, out: _Collector) -> None:
    if not plan.requirements:
        out.add(
            "$.requirements",
            "requirements.empty",
            "the plan names no requirements, so nothing says what 'done' means",
            'add "requirements": [{"id": "REQ-001", "description": "...", "priority": "must"}] '
            "and list them in each step's covers",
        )
    known = {r.id for r in plan.requirements}
    covered: set[str] = set()
    for step in plan.steps:
        for ci, req in enumerate(step.covers):
            if req not in known:
                out.add(
                    f"{step.json_path}.covers[{ci}]",
                    "covers.unknown-requirement",
                    f"step {step.id} covers {req!r}, which is not a requirement of this plan",
                    "fix the id or add the requirement to $.requirements",
                )
            covered.add(req)
    for i, requirement in enumerate(plan.requirements):
        if requirement.mandatory and requirement.id not in covered:
            out.add(
                f"$.requirements[{i}]",
                "requirement.uncovered",
                f"{requirement.priority} requirement {requirement.id!r} is covered by no step",
                f'add "{requirement.id}" to the covers list of the step that proves it',
            )


def _dependencies(plan: Plan, step: Step, known: dict[str, Step], out: _Collector) -> None:  # noqa: C901, PLR0912 (one rule table: the dependency checks)
    path = f"{step.json_path}.depends_on"
    direct: set[str] = set()
    edges_seen: set[str] = set()
    if not step.implicit_dependencies:
        for ci, clause in enumerate(step.depends_on):
            cpath = f"{path}[{ci}]"
            if clause.is_any_of and not clause.alternatives:
                out.add(
                    f"{cpath}.any_of",
                    "dep.empty-any-of",
                    "an any_of clause with no alternatives can never be satisfied",
                    "list at least one step in any_of, or remove the clause",
                )
            for ai, alt in enumerate(clause.alternatives):
                apath = f"{cpath}.any_of[{ai}]" if clause.is_any_of else cpath
                if alt == step.id:
                    out.add(
                        apath,
                        "dep.self",
                        f"step {step.id} depends on itself",
                        "remove the self-reference",
                    )
                elif alt not in known:
                    out.add(
                        apath,
                        "dep.unknown-step",
                        f"step {step.id} depends on step {alt!r}, which does not exist",
                        "use one of the plan's step ids: "
                        + ", ".join(plan.step_ids[:10])
                        + (", ..." if len(plan.step_ids) > 10 else ""),
                    )
                if alt in edges_seen:
                    out.add(
                        apath,
                        "dep.duplicate",
                        f"step {step.id} names dependency {alt!r} more than once",
                        "name each dependency once",
                    )
                edges_seen.add(alt)
                direct.add(alt)
    provided: set[tuple[str, str]] = set()
    for ri, ref in enumerate(step.requires_outputs):
        rpath = f"{step.json_path}.requires_outputs[{ri}]"
        upstream = known.get(ref.step)
        if upstream is None:
            out.add(
                f"{rpath}.step",
                "outputs.unknown-step",
                f"requires_outputs names step {ref.step!r}, which does not exist",
                "name an existing upstream step",
            )
            continue
        # in a legacy sequential plan every earlier step is a (transitive) prerequisite
        prerequisite = upstream.index < step.index if plan.legacy else ref.step in direct
        if not prerequisite:
            out.add(
                f"{rpath}.step",
                "outputs.not-a-dependency",
                f"step {step.id} requires an output of step {ref.step}, which is not one of its "
                "dependencies",
                f"add {ref.step} to depends_on, or remove this entry",
            )
        if upstream.output(ref.name) is None:
            declared = ", ".join(o.name for o in upstream.outputs) or "none"
            out.add(
                f"{rpath}.name",
                "outputs.unknown-output",
                f"step {ref.step} declares no output {ref.name!r} (it declares: {declared})",
                f"declare the output on step {ref.step} or fix the name",
            )
        provided.add((ref.step, ref.name))
    if plan.legacy:
        return
    tied = {s for s, _ in provided}
    for ci, clause in enumerate(step.depends_on):
        for ai, alt in enumerate(clause.alternatives):
            if alt not in known or alt == step.id or alt in tied:
                continue
            upstream = known[alt]
            outputs = ", ".join(repr(o.name) for o in upstream.outputs)
            out.add(
                f"{path}[{ci}]" + (f".any_of[{ai}]" if clause.is_any_of else ""),
                "dep.no-output-contract",
                f"step {step.id} depends on step {alt} but requires none of its outputs: a "
                "dependency must be tied to something the upstream step produces",
                (
                    f'add {{"step": {upstream.raw_id!r}, "name": ...}} to requires_outputs '
                    f"(declared outputs: {outputs})"
                    if upstream.outputs
                    else f"declare an output with a check on step {alt} and require it here"
                ).replace("'", '"'),
            )


_CHECK_PATH_FIELDS = ("path", "cwd")


def _all_checks(step: Step) -> Iterator[Check]:
    yield from step.verify
    yield from step.readback
    for output in step.outputs:
        yield from output.checks


def _checks(step: Step, out: _Collector) -> None:
    if not any(c.behavioural for c in step.verify):
        out.add(
            f"{step.json_path}.verify",
            "step.no-behavioural-check",
            f"step {step.id} has no behavioural check: file and regex checks alone cannot show "
            "that anything works",
            'add a "run", "exec" or "pytest" check to verify',
        )
    for output in step.outputs:
        if not output.checks:
            out.add(
                f"{output.json_path}.verify",
                "output.no-check",
                f"output {output.name!r} of step {step.id} has no check",
                "add a check that proves the output exists and is right (e.g. file_exists)",
            )
    for output in step.outputs:
        if _unstorable_name(output.name):
            out.add(
                f"{output.json_path}.name",
                "output.name-unstorable",
                f"output {output.name!r} of step {step.id}: a git tree cannot hold it as a name "
                f"(the run records it under steps/{step.id}/outputs/{output.name}/)",
                "rename the output, e.g. 'report' (not '.', '..' or a spelling of '.git')",
            )
    names = Counter(o.name for o in step.outputs)
    for name, n in names.items():
        if n > 1:
            out.add(
                f"{step.json_path}.outputs",
                "output.duplicate-name",
                f"step {step.id} declares output {name!r} {n} times",
                "give each output of a step a unique name",
            )
    for check in _all_checks(step):
        _one_check(check, out)
    _artifacts(step, out)
    for ii, pattern in enumerate(step.inputs):
        message = check_relative_spec(pattern)
        if message:
            out.add(
                f"{step.json_path}.inputs[{ii}]",
                "path.escapes-workspace",
                f"input pattern {pattern!r}: {message}",
                "use a pattern relative to the repository root without '..'",
            )
    _uncovered_paths(step, out)


def _uncovered_paths(step: Step, out: _Collector) -> None:
    """A warning for each path a check of a step with ``inputs`` names (a file it reads or
    runs) that none of its inputs covers: the step's pass is carried while its inputs are
    unchanged, so a change there alone would never make it run again."""
    if not step.inputs:
        return
    from gitaudit.plan.inputs import matches_input  # pygit2 behind it: only when needed

    for check in _all_checks(step):
        path = check.path if check.type in ("file_exists", "regex", "exec") else None
        if path and not any(matches_input(p, path) for p in step.inputs):
            out.add(
                f"{check.json_path}.path",
                "inputs.path-not-covered",
                f"step {step.id} checks {path!r}, which none of its inputs covers: its pass "
                "is carried across a change there",
                f"add {path!r} (or a pattern covering it) to the step's inputs",
                severity="warning",
            )


def _artifacts(step: Step, out: _Collector) -> None:
    """Artifact paths name files inside the repository (never the git directory)."""
    where = [(f"{step.json_path}.artifacts[{i}]", p) for i, p in enumerate(step.artifacts)]
    for output in step.outputs:
        where += [(f"{output.json_path}.artifacts[{i}]", p) for i, p in enumerate(output.artifacts)]
    for path_at, path in where:
        message = check_relative_spec(path) or _artifact_name_problem(path)
        if message:
            out.add(
                path_at,
                "path.escapes-workspace",
                f"artifact {path!r}: {message}",
                "name a file relative to the repository root, without '..'",
            )


def _artifact_name_problem(path: str) -> str | None:
    """Why the run's tree cannot store the artifact *path* under ``steps/<id>/artifacts/`` as
    written, or None. A git tree holds no empty or ``.`` name, and git refuses ``.git`` in the
    spellings Windows reads as it (``.GIT.``, ``git~1``, ``.git::$INDEX_ALLOCATION``): a run
    that executed every check would then fail to record anything, so such a path is refused
    before anything runs."""
    parts = path.strip("/").split("/")
    if parts in ([""], ["."]) or parts[0] == ".git":
        return "it is the repository itself or its git directory"
    if any(p in ("", ".") for p in parts):
        return "it has an empty or '.' component (write it plainly, e.g. 'reports/junit.xml')"
    if any(_names_git(p) for p in parts):
        return "it names a git directory (in one of its spellings)"
    return None


def _names_git(name: str) -> bool:
    """Whether git refuses *name* in a tree as a spelling of ``.git`` (``.GIT.``, ``git~1``,
    ``.git::$INDEX_ALLOCATION``)."""
    return name.lower().split(":", 1)[0].rstrip(". ") in (".git", "git~1")


def _unstorable_name(name: str) -> bool:
    """Whether an output's *name*, one folder of the run's tree (``steps/<id>/outputs/<name>/``,
    ``upstream/<step>/<name>/``), is one a git tree cannot hold: ``.``, ``..`` or a spelling of
    ``.git``. Such an output validated and sealed, every check of a run then executed (a
    deployment's too), and the run recorded nothing."""
    return name in (".", "..") or _names_git(name)


def _one_check(check: Check, out: _Collector) -> None:
    raw_argv_given = check.type == "run" and check.cmd is None
    if check.type == "run" and check.shell and raw_argv_given:
        out.add(
            f"{check.json_path}.shell",
            "check.shell-with-argv",
            "'shell: true' cannot be combined with 'argv'",
            'use "cmd": "..." with "shell": true, or drop "shell" and keep argv',
        )
    for fname in _CHECK_PATH_FIELDS:
        value = getattr(check, fname)
        if value is None:
            continue
        message = check_relative_spec(value)
        if message:
            out.add(
                f"{check.json_path}.{fname}",
                "path.escapes-workspace",
                f"{fname} {value!r}: {message}",
                "use a path relative to the repository root, without '..'",
            )
    for fname in ("pattern", "output_regex"):
        value = getattr(check, fname)
        if value is None:
            continue
        try:
            re.compile(value)
        except re.error as exc:
            out.add(
                f"{check.json_path}.{fname}",
                "regex.invalid",
                f"invalid regular expression {value!r}: {exc}",
                "fix the pattern (Python re syntax; backslashes must be doubled in JSON)",
            )


def _cycles(plan: Plan, out: _Collector) -> None:
    for cycle in find_cycles(adjacency(plan)):
        if len(cycle) == 1:
            continue  # reported as dep.self
        first = plan.step(cycle[0])
        assert first is not None
        ring = " -> ".join([*cycle, cycle[0]])
        out.add(
            f"{first.json_path}.depends_on",
            "graph.cycle",
            f"dependency cycle: {ring} (each step waits for the next, so none can start)",
            "break the cycle: make the iteration explicit with a separate revision step",
        )


def validate_bytes(
    data: bytes, *, name: str, source: str, environment: bool = True, schema_checked: bool = False
) -> tuple[Plan | None, ValidationReport]:
    """All layers for one plan file; the plan is returned whenever it could be built.
    *schema_checked*: see :func:`gitaudit.plan.load.load_plan`."""
    plan, problems = load_plan(data, name=name, source=source, schema_checked=schema_checked)
    if plan is not None:
        problems = problems + semantic_problems(plan)
        if environment:
            problems += environment_problems(plan)
    return plan, ValidationReport(name, source, tuple(problems))
