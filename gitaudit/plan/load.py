"""Layers 1 and 2 of validation: parse the JSON, check it against the schema, build the model.

Everything here works on bytes, so the same code reads a plan from the work tree, from a commit
(``status REV``) or from the sealed copy on ``refs/audit/plans``.
"""

from __future__ import annotations

import json
import math
import os
import shlex
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import jsonschema

from gitaudit.plan.durations import parse_duration
from gitaudit.plan.model import (
    DEFAULT_COST,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_OUTPUT,
    DEFAULT_TIMEOUT,
    Check,
    CheckType,
    Clause,
    Home,
    Output,
    OutputRef,
    PathKind,
    Plan,
    Priority,
    Requirement,
    Step,
    Workspace,
)
from gitaudit.plan.problems import Problem


@cache
def schema_bytes() -> bytes:
    """The plan JSON Schema file shipped in the package, as stored."""
    try:  # beside this module (a plain read: the import system's resource readers cost 3 ms)
        with open(os.path.join(os.path.dirname(__file__), "schema.json"), "rb") as fh:
            return fh.read()
    except OSError:  # installed some other way (a zip archive): ask the import system
        from importlib import resources

        return resources.files("gitaudit.plan").joinpath("schema.json").read_bytes()


@cache
def schema() -> dict[str, Any]:
    """The plan JSON Schema shipped in the package (the single source of truth for the shape)."""
    return cast(dict[str, Any], json.loads(schema_bytes()))


@cache
def _validator() -> Any:
    """The pure-Python validator, imported only to explain an invalid plan (it is slow to load).

    Its ``pattern`` reads ``$`` as JSON Schema (ECMA 262) does, the very end, as the compiled
    validator does: Python's ``$`` also matches before a final line break, so ``"unit\\n"`` met
    the id pattern here and not there, and a plan one validator refused passed as valid."""
    import re

    import jsonschema

    def pattern(validator: Any, patrn: str, instance: Any, _schema: Any) -> Any:
        strict = patrn[:-1] + r"\Z" if patrn.endswith("$") and not patrn.endswith(r"\$") else patrn
        if validator.is_type(instance, "string") and not re.search(strict, instance):
            yield jsonschema.ValidationError(f"{instance!r} does not match {patrn!r}")

    extended = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        jsonschema.Draft202012Validator, {"pattern": pattern}
    )
    return extended(schema())


@cache
def _fast_validator() -> Any:
    """A compiled validator (jsonschema-rs) for the common case: the plan is valid.

    The pure-Python validator is kept for explaining invalid plans (its errors carry the paths
    and context the messages are built from); the compiled one only answers "valid or not",
    about 200x faster on large plans.
    """
    import jsonschema_rs

    return jsonschema_rs.validator_for(schema())


def json_path(parts: Sequence[object]) -> str:
    """``["steps", 0, "verify"]`` -> ``$.steps[0].verify``."""
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(f"{token} is too large for a JSON number gitaudit can keep")
    return value


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not valid JSON")


def parse_json(data: bytes, *, plan: str, source: str) -> tuple[Any, list[Problem]]:  # noqa: PLR0911 (one table: JSON failure -> problem)
    """Layer 1: bytes -> JSON value, or a problem with line and column."""

    def problem(path: str, code: str, message: str, hint: str) -> list[Problem]:
        return [Problem(plan, source, path, code, message, hint)]

    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return None, problem(
            "$", "json.encoding", f"not UTF-8 text (byte {exc.start})", "save the plan as UTF-8"
        )
    try:
        value = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
        )
        # lone surrogates ("\ud800") parse, but are not Unicode text: no tool can encode them
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except RecursionError:
        return None, problem(
            "$", "json.invalid", "the JSON is nested too deeply", "flatten the document"
        )
    except UnicodeEncodeError:
        return None, problem(
            "$",
            "json.invalid",
            "a string holds a lone UTF-16 surrogate escape (such as \\ud800)",
            "remove the escape, or write the character it was meant to be",
        )
    except json.JSONDecodeError as exc:
        return None, problem(
            "$",
            "json.invalid",
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
            "fix the JSON syntax at that position (a missing comma or quote is the usual cause)",
        )
    except _DuplicateKey as exc:
        return None, problem(
            "$",
            "json.duplicate-key",
            f"key {str(exc)!r} appears twice in one object",
            "keep one of the two entries; JSON readers disagree about which one wins",
        )
    except ValueError as exc:
        return None, problem("$", "json.invalid", str(exc), "use only standard JSON values")
    return value, []


def _schema_hint(error: jsonschema.ValidationError) -> tuple[str, str, str]:  # noqa: PLR0911 (one table: schema error -> phrasing)
    """(code, message, hint) for one schema error, phrased for a person."""
    kind = str(error.validator)
    where = error.absolute_path
    if kind == "additionalProperties":
        allowed = sorted(cast(Mapping[str, Any], error.schema).get("properties", {}))
        extra = sorted(set(cast(Mapping[str, Any], error.instance)) - set(allowed))
        from difflib import get_close_matches  # explaining an invalid plan only

        tips = []
        for key in extra:
            close = get_close_matches(key, allowed, n=1)
            tips.append(f"{key!r} -> {close[0]!r}" if close else f"remove {key!r}")
        return (
            "schema.unknown-field",
            f"unknown field(s) {', '.join(repr(k) for k in extra)}",
            "; ".join(tips) + f" (allowed: {', '.join(allowed)})",
        )
    if kind == "required":
        return "schema.required", error.message, "add the missing field"
    if kind == "oneOf" and where and (where[-1] == "id" or "depends_on" in where):
        return (
            "schema.step-id",
            f"{error.instance!r} is not a step id or an any_of clause",
            'use a positive integer, a slug such as "build-model", or {"any_of": [ids...]}',
        )
    if kind == "oneOf" and where and where[-1] == "step":
        return (
            "schema.step-id",
            f"{error.instance!r} is not a step id",
            'use a positive integer or a slug such as "build-model"',
        )
    if kind == "enum":
        return "schema.enum", error.message, "use one of the listed values"
    if kind == "type":
        return "schema.type", error.message, f"use a value of type {error.validator_value}"
    if kind == "pattern" and "valid_for" in where:
        return (
            "duration.invalid",
            f"{error.instance!r} is not a duration",
            'use e.g. "30m", "12h", "7d"',
        )
    if kind == "anyOf" and error.instance and isinstance(error.instance, dict):
        return "schema.required", "a run check needs 'argv' or 'cmd'", 'add "argv": [...]'
    if kind == "not":
        both = " and ".join(
            repr(f) for f in cast(Mapping[str, Any], error.validator_value)["required"]
        )
        return "schema.conflict", f"{both} cannot be given together", "keep only one of them"
    return f"schema.{kind}", error.message, "see docs/plan-format.md for the field's shape"


def _iter_leaf_errors(
    errors: Iterator[jsonschema.ValidationError],
) -> Iterator[jsonschema.ValidationError]:
    for error in errors:
        if str(error.validator) == "allOf" or (str(error.validator) == "if"):
            yield from _iter_leaf_errors(iter(error.context or ()))
        else:
            yield error


def schema_problems(value: Any, *, plan: str, source: str) -> list[Problem]:
    """Layer 2: every schema violation, sorted by position in the file."""
    if _fast_validator().is_valid(value):
        return []
    problems = []
    for error in _iter_leaf_errors(_validator().iter_errors(value)):
        code, message, hint = _schema_hint(error)
        problems.append(Problem(plan, source, json_path(error.absolute_path), code, message, hint))
    if not problems:  # the two validators disagree: the compiled one's "invalid" stands
        problems.append(
            Problem(
                plan,
                source,
                "$",
                "schema.invalid",
                "the plan does not match the schema, though no single value could be named",
                "compare the plan with docs/plan.schema.json, value by value",
            )
        )
    # stable order: by JSON path as it appears, then code
    problems.sort(key=lambda p: (_path_key(p.path), p.code))
    return _dedupe(problems)


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen: set[tuple[str, str, str]] = set()
    out = []
    for p in problems:
        key = (p.path, p.code, p.message)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _path_key(path: str) -> list[tuple[int, int | str]]:
    key: list[tuple[int, int | str]] = []
    for part in path.replace("]", "").replace("[", ".").split(".")[1:]:
        numeric = part.isascii() and part.isdigit() and len(part) < 18
        key.append((0, int(part)) if numeric else (1, part))
    return key


def step_key(raw_id: object) -> str:
    """The internal spelling of a step id: ``1``, ``1.0`` and ``"1"`` are all ``"1"``."""
    if isinstance(raw_id, float) and raw_id.is_integer():
        return str(int(raw_id))
    return str(raw_id)


def _split(text: str) -> tuple[str, ...] | None:
    try:
        return tuple(shlex.split(text))
    except ValueError:
        return None


def _build_check(
    raw: Mapping[str, Any], path: str, plan: str, source: str
) -> tuple[Check, list[Problem]]:
    problems: list[Problem] = []
    ctype = cast(CheckType, raw["type"])
    argv: tuple[str, ...] = ()
    cmd: str | None = raw.get("cmd")
    shell = bool(raw.get("shell", False))
    if ctype == "run":
        if "argv" in raw:
            argv = tuple(raw["argv"])
        elif cmd is not None and not shell:
            split = _split(cmd)
            if split is None or not split:
                problems.append(
                    Problem(
                        plan,
                        source,
                        f"{path}.cmd",
                        "check.cmd-unparseable",
                        f"cannot split {cmd!r} into arguments (unbalanced quotes?)",
                        'write it as "argv": [...] or fix the quoting',
                    )
                )
            else:
                argv = split
    elif ctype == "pytest":
        args = raw.get("args")
        if isinstance(args, str):
            split = _split(args)
            if split is None:
                problems.append(
                    Problem(
                        plan,
                        source,
                        f"{path}.args",
                        "check.cmd-unparseable",
                        f"cannot split {args!r} into arguments (unbalanced quotes?)",
                        'write it as "argv": [...] or fix the quoting',
                    )
                )
            argv = split or ()
        else:
            argv = tuple(raw.get("argv", ()))
    check = Check(
        type=ctype,
        json_path=path,
        name=raw.get("name"),
        argv=argv,
        cmd=cmd,
        shell=shell,
        path=raw.get("path"),
        args=tuple(raw.get("args", ())) if ctype == "exec" else (),
        pattern=raw.get("pattern"),
        expect_exit=int(raw.get("expect_exit", 0)),
        output_regex=raw.get("output_regex"),
        timeout=float(raw.get("timeout", DEFAULT_TIMEOUT)),
        max_output_bytes=int(raw.get("max_output_bytes", DEFAULT_MAX_OUTPUT)),
        env=dict(raw.get("env", {})),
        cwd=raw.get("cwd"),
        kind=cast(PathKind, raw.get("kind", "file")),
    )
    return check, problems


def _build_checks(
    raws: Sequence[Mapping[str, Any]], path: str, plan: str, source: str
) -> tuple[tuple[Check, ...], list[Problem]]:
    checks, problems = [], []
    for i, raw in enumerate(raws):
        check, probs = _build_check(raw, f"{path}[{i}]", plan, source)
        checks.append(check)
        problems.extend(probs)
    return tuple(checks), problems


def build_plan(value: Mapping[str, Any], *, name: str, source: str) -> tuple[Plan, list[Problem]]:
    """Schema-valid JSON -> :class:`Plan`, plus problems found while building (warnings, splits)."""
    problems: list[Problem] = []
    raw_steps: list[Mapping[str, Any]] = list(value["steps"])
    legacy = not any("depends_on" in s for s in raw_steps)
    steps: list[Step] = []
    previous: str | None = None
    for index, raw in enumerate(raw_steps):
        spath = f"$.steps[{index}]"
        sid = step_key(raw["id"])
        if "status" in raw:
            problems.append(
                Problem(
                    name,
                    source,
                    f"{spath}.status",
                    "step.status-ignored",
                    "'status' is runtime state and is ignored: gitaudit computes it from evidence",
                    "remove the field; `git audit status` shows the real state",
                    severity="warning",
                )
            )
        if legacy:
            depends: tuple[Clause, ...] = (Clause((previous,)),) if previous is not None else ()
        else:
            clauses = []
            for item in raw.get("depends_on", ()):
                if isinstance(item, dict):
                    clauses.append(
                        Clause(tuple(step_key(a) for a in item["any_of"]), is_any_of=True)
                    )
                else:
                    clauses.append(Clause((step_key(item),)))
            depends = tuple(clauses)
        verify, probs = _build_checks(raw["verify"], f"{spath}.verify", name, source)
        problems.extend(probs)
        readback, probs = _build_checks(raw.get("readback", ()), f"{spath}.readback", name, source)
        problems.extend(probs)
        outputs = []
        for oi, out in enumerate(raw.get("outputs", ())):
            opath = f"{spath}.outputs[{oi}]"
            checks, probs = _build_checks(out["verify"], f"{opath}.verify", name, source)
            problems.extend(probs)
            outputs.append(
                Output(out["name"], checks, opath, artifacts=tuple(out.get("artifacts", ())))
            )
        valid_for = raw.get("valid_for")
        if isinstance(valid_for, str) and parse_duration(valid_for) is None:
            problems.append(
                Problem(
                    name,
                    source,
                    f"{spath}.valid_for",
                    "duration.invalid",
                    f"{valid_for!r} is a zero duration: evidence would expire at once",
                    'use a positive duration such as "30m", "12h" or "7d", or leave it out',
                )
            )
        steps.append(
            Step(
                id=sid,
                raw_id=raw["id"],
                index=index,
                title=raw.get("title", ""),
                depends_on=depends,
                requires_outputs=tuple(
                    OutputRef(step_key(r["step"]), r["name"])
                    for r in raw.get("requires_outputs", ())
                ),
                covers=tuple(raw.get("covers", ())),
                verify=verify,
                outputs=tuple(outputs),
                readback=readback,
                cost=float(raw.get("cost", DEFAULT_COST)),
                owner=raw.get("owner"),
                valid_for=parse_duration(valid_for) if isinstance(valid_for, str) else None,
                idempotent=bool(raw.get("idempotent", True)),
                inputs=tuple(raw.get("inputs", ())),
                max_attempts=int(raw.get("max_attempts", DEFAULT_MAX_ATTEMPTS)),
                implicit_dependencies=legacy and previous is not None,
                workspace=cast(Workspace | None, raw.get("workspace")),
                pass_env=tuple(raw.get("pass_env", ())),
                ignored_paths=tuple(raw.get("ignored_paths", ())),
                runs_on=tuple(dict.fromkeys(raw.get("runs_on", ()))),
                artifacts=tuple(raw.get("artifacts", ())),
            )
        )
        previous = sid
    requirements = tuple(
        Requirement(r["id"], r["description"], cast(Priority, r.get("priority", "must")))
        for r in value.get("requirements", ())
    )
    plan = Plan(
        name=name,
        source=source,
        task=value.get("task", ""),
        requirements=requirements,
        required_tools=tuple(value.get("required_tools", ())),
        steps=tuple(steps),
        legacy=legacy,
        raw=value,
        workspace=cast(Workspace, value.get("workspace", "checkout")),
        pass_env=tuple(value.get("pass_env", ())),
        home=cast(Home, value.get("home", "private")),
        ignored_paths=tuple(value.get("ignored_paths", ())),
        filters=tuple(value.get("filters", ())),
        python=str(value.get("python", "python3")),
        protect=tuple(dict.fromkeys(value.get("protect", ()))),
    )
    return plan, problems


def load_plan(
    data: bytes, *, name: str, source: str, schema_checked: bool = False
) -> tuple[Plan | None, list[Problem]]:
    """Layers 1-2 and model building. Returns no plan when the file is not schema-valid.
    *schema_checked*: these very bytes are known to satisfy the schema
    (:mod:`gitaudit.plan.known_valid`), so layer 2 is skipped."""
    value, problems = parse_json(data, plan=name, source=source)
    if problems:
        return None, problems
    problems = [] if schema_checked else schema_problems(value, plan=name, source=source)
    if problems:
        return None, problems
    return build_plan(value, name=name, source=source)
