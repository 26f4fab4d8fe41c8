"""The plan as typed, immutable values.

A plan file is parsed once (:mod:`gitaudit.plan.load`) into these dataclasses; every later
layer (validation, digest, runner, gate) reads them and never the raw JSON. Step ids are strings
internally (``1`` and ``"build"`` become ``"1"`` and ``"build"``) while :attr:`Step.raw_id` keeps
the spelling of the file for display and for the contract.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from functools import cached_property
from typing import Literal

from gitaudit.frozen import frozen

StepId = str
Priority = Literal["must", "should", "may"]
CheckType = Literal["run", "exec", "pytest", "file_exists", "regex"]
Workspace = Literal["checkout", "live"]
Home = Literal["private", "user"]
PathKind = Literal["file", "dir"]

BEHAVIOURAL_TYPES: frozenset[str] = frozenset({"run", "exec", "pytest"})
DEFAULT_TIMEOUT = 300.0
DEFAULT_MAX_OUTPUT = 1 << 20
DEFAULT_COST = 1.0
DEFAULT_MAX_ATTEMPTS = 3


@frozen
class Requirement:
    id: str
    description: str
    priority: Priority = "must"

    @property
    def mandatory(self) -> bool:
        """must and should requirements have to be covered; may requirements need not."""
        return self.priority in ("must", "should")


@frozen
class Check:
    """One deterministic check. Which fields matter depends on :attr:`type`.

    * ``run``: ``argv`` (``cmd`` strings are split shell-like into argv at load time unless
      ``shell`` is true, in which case ``cmd`` runs through ``/bin/sh -c``).
    * ``exec``: ``path`` (an executable in the workspace) and ``args``.
    * ``pytest``: ``argv`` (the arguments after ``python -m pytest``).
    * ``file_exists``: ``path``.  ``regex``: ``path`` and ``pattern``.
    """

    type: CheckType
    json_path: str
    name: str | None = None
    argv: tuple[str, ...] = ()
    cmd: str | None = None
    shell: bool = False
    path: str | None = None
    args: tuple[str, ...] = ()
    pattern: str | None = None
    expect_exit: int = 0
    output_regex: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    max_output_bytes: int = DEFAULT_MAX_OUTPUT
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    kind: PathKind = "file"  # file_exists: what must exist

    @property
    def behavioural(self) -> bool:
        return self.type in BEHAVIOURAL_TYPES

    def describe(self) -> str:
        """A short human description, e.g. ``run: pytest -q`` or ``file_exists: out/model.json``."""
        if self.type == "run":
            what = self.cmd if self.shell and self.cmd else " ".join(self.argv)
            return f"run: {what}" + (" (shell)" if self.shell else "")
        if self.type == "exec":
            return f"exec: {' '.join((self.path or '', *self.args)).strip()}"
        if self.type == "pytest":
            return f"pytest: {' '.join(self.argv)}".rstrip()
        if self.type == "regex":
            return f"regex: {self.path} =~ /{self.pattern}/"
        return f"file_exists: {self.path}" + ("/ (dir)" if self.kind == "dir" else "")


@frozen
class Output:
    name: str
    checks: tuple[Check, ...]
    json_path: str
    artifacts: tuple[str, ...] = ()  # files kept with the evidence (see Step.artifacts)


@frozen
class OutputRef:
    step: StepId
    name: str


@frozen
class Clause:
    """One AND item of ``depends_on``: satisfied when any of :attr:`alternatives` is verified.

    A plain step id is a clause with one alternative; ``{"any_of": [...]}`` is an OR clause.
    """

    alternatives: tuple[StepId, ...]
    is_any_of: bool = False

    def __str__(self) -> str:
        if self.is_any_of:
            return "any_of(" + ", ".join(self.alternatives) + ")"
        return self.alternatives[0] if self.alternatives else "?"


@frozen
class Step:
    id: StepId
    raw_id: int | str
    index: int
    title: str
    depends_on: tuple[Clause, ...]
    requires_outputs: tuple[OutputRef, ...]
    covers: tuple[str, ...]
    verify: tuple[Check, ...]
    outputs: tuple[Output, ...]
    readback: tuple[Check, ...] = ()
    cost: float = DEFAULT_COST
    owner: str | None = None
    valid_for: int | None = None  # seconds
    idempotent: bool = True
    inputs: tuple[str, ...] = ()
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    implicit_dependencies: bool = False  # legacy sequential plan: depends on the previous step
    workspace: Workspace | None = None  # None: the plan's
    pass_env: tuple[str, ...] = ()
    ignored_paths: tuple[str, ...] = ()
    runs_on: tuple[str, ...] = ()  # runner labels: evidence from a runner with each is needed
    # files the step writes (junit.xml, coverage.xml) stored with its evidence: not checks
    artifacts: tuple[str, ...] = ()

    @property
    def json_path(self) -> str:
        return f"$.steps[{self.index}]"

    def all_artifacts(self) -> tuple[tuple[str, str | None], ...]:
        """Every declared artifact path with the output that declares it (None: the step)."""
        found: dict[str, str | None] = {p: None for p in self.artifacts}
        for output in self.outputs:
            for path in output.artifacts:
                found.setdefault(path, output.name)
        return tuple(found.items())

    @property
    def label(self) -> str:
        return f"{self.id}" + (f" ({self.title})" if self.title else "")

    def dependency_ids(self) -> tuple[StepId, ...]:
        """Every step named in any clause, in order of first appearance."""
        seen: dict[StepId, None] = {}
        for clause in self.depends_on:
            for alt in clause.alternatives:
                seen.setdefault(alt, None)
        return tuple(seen)

    def output(self, name: str) -> Output | None:
        return next((o for o in self.outputs if o.name == name), None)

    def upstream_outputs(self) -> tuple[OutputRef, ...]:
        """``requires_outputs`` as the contract binds it: each entry once, sorted by step and
        name. The runner re-executes them in this order, one checkout for all, so an earlier
        one may write what a later one (or the step's checks) reads: the file's order and
        repeats, which the digest does not see, must not decide it."""
        return tuple(sorted(set(self.requires_outputs), key=lambda r: (r.step, r.name)))


@frozen
class Plan:
    name: str
    source: str  # where it was read from, for messages: a path or "<rev>:<path>"
    task: str
    requirements: tuple[Requirement, ...]
    required_tools: tuple[str, ...]
    steps: tuple[Step, ...]
    legacy: bool  # no step declares depends_on: sequential semantics
    raw: Mapping[str, object] = field(repr=False, compare=False, default_factory=dict)
    # what checks may read beyond the judged tree (see gitaudit.plan.exposure)
    workspace: Workspace = "checkout"
    pass_env: tuple[str, ...] = ()
    home: Home = "private"
    ignored_paths: tuple[str, ...] = ()
    filters: tuple[str, ...] = ()
    python: str = "python3"
    # globs of files the seal binds besides those the checks name; "!glob" exempts (plan/protect)
    protect: tuple[str, ...] = ()

    def step(self, step_id: StepId) -> Step | None:
        return self._index.get(step_id)

    @cached_property
    def _index(self) -> dict[StepId, Step]:
        # the first step with an id wins (duplicates are a validation error anyway)
        index: dict[StepId, Step] = {}
        for s in self.steps:
            index.setdefault(s.id, s)
        return index

    @property
    def step_ids(self) -> tuple[StepId, ...]:
        return tuple(s.id for s in self.steps)

    def requirement(self, req_id: str) -> Requirement | None:
        return next((r for r in self.requirements if r.id == req_id), None)

    def covering_steps(self, req_id: str) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if req_id in s.covers)

    def workspace_of(self, step: Step) -> Workspace:
        """Where *step*'s checks run: its own ``workspace``, else the plan's."""
        return step.workspace or self.workspace

    def pass_env_of(self, step: Step) -> tuple[str, ...]:
        """The variables *step*'s checks may see besides the allow-list: the plan's and its own."""
        return tuple(dict.fromkeys((*self.pass_env, *step.pass_env)))

    def all_ignored_paths(self) -> tuple[str, ...]:
        """Every declared ignored path: the plan's and each step's."""
        return tuple(
            dict.fromkeys((*self.ignored_paths, *(p for s in self.steps for p in s.ignored_paths)))
        )
