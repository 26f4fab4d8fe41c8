"""What a plan lets its checks read beyond the judged tree, and how changing it counts.

By default checks run in a private checkout of exactly the judged tree, with an allow-listed
environment, a private HOME and no ignored files (see :mod:`gitaudit.run.checkout` and
:mod:`gitaudit.checks.environment`). A plan may open more, and each opening is part of the sealed
contract:

* ``workspace: "live"`` (plan or step): checks run in the live work tree;
* ``pass_env`` (plan or step): variables of the caller's environment;
* ``home: "user"``: the user's HOME instead of an empty private one;
* ``ignored_paths`` (plan or step): ignored paths of the work tree, linked into the checkout;
* ``filters``: content filters the tree's attributes ask for, applied with the user's driver;
* ``python``: the Python that runs ``pytest`` checks.

Opening more is a **weakening** (it lets something the tree does not pin decide an outcome);
closing is a strengthening, but for ``pass_env``: a variable the sealed checks were passed is
the caller's (the user's run sets it, the agent cannot), and a check that no longer sees it runs
otherwise (a suite testing more when it is set skips that), so removing one weakens, as changing
a check's own ``env`` does. The fields enter the contract only when they differ from their
defaults, so contracts sealed before they existed keep their digests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from gitaudit.plan.load import step_key
from gitaudit.plan.model import Plan, Step

Kind = Literal["weakened", "strengthened", "neutral"]

PLAN_DEFAULTS: dict[str, Any] = {
    "workspace": "checkout",
    "pass_env": [],
    "home": "private",
    "ignored_paths": [],
    "filters": [],
    "python": "python3",
}
STEP_DEFAULTS: dict[str, Any] = {"workspace": None, "pass_env": [], "ignored_paths": []}

# never passed to a check, even when declared: they would let a check sign evidence or read the
# keys (validation refuses them in pass_env)
FORBIDDEN_PREFIXES = ("GITAUDIT_",)
FORBIDDEN = ("SSH_AUTH_SOCK",)


def forbidden(name: str) -> bool:
    """Whether a variable, or a ``pass_env`` pattern (``PREFIX*``), could pass what a check may
    never see: ``GITAUDIT_*`` or ``SSH_AUTH_SOCK``."""
    if name.endswith("*"):
        prefix = name[:-1]
        return any(f.startswith(prefix) for f in FORBIDDEN) or any(
            p.startswith(prefix) or prefix.startswith(p) for p in FORBIDDEN_PREFIXES
        )
    return name in FORBIDDEN or name.startswith(FORBIDDEN_PREFIXES)


def plan_fields(plan: Plan) -> dict[str, Any]:
    """The plan-level fields that differ from their defaults, in contract form."""
    values = {
        "workspace": plan.workspace,
        "pass_env": sorted(set(plan.pass_env)),
        "home": plan.home,
        "ignored_paths": sorted(set(plan.ignored_paths)),
        "filters": sorted(set(plan.filters)),
        "python": plan.python,
    }
    return {k: v for k, v in values.items() if v != PLAN_DEFAULTS[k]}


def step_fields(step: Step) -> dict[str, Any]:
    """The step-level fields that differ from their defaults, in contract form."""
    values = {
        "workspace": step.workspace,
        "pass_env": sorted(set(step.pass_env)),
        "ignored_paths": sorted(set(step.ignored_paths)),
    }
    return {k: v for k, v in values.items() if v != STEP_DEFAULTS[k]}


def changes(
    old: Mapping[str, Any], new: Mapping[str, Any], *, step: bool
) -> list[tuple[Kind, str]]:
    """(kind, message) for each exposure field but ``workspace`` that differs between two
    contracts of a plan (or of a step, with *step*); see :func:`workspace_changes`."""
    defaults = STEP_DEFAULTS if step else PLAN_DEFAULTS
    out: list[tuple[Kind, str]] = []
    for name, default in defaults.items():
        was, now = old.get(name, default), new.get(name, default)
        if name == "workspace" or was == now:
            continue
        if isinstance(default, list):
            added, removed = sorted(set(now) - set(was)), sorted(set(was) - set(now))
            if added:
                out.append(("weakened", f"{name}: now also {', '.join(added)}"))
            if removed and name == "pass_env":
                # the sealed checks saw the caller's value, which the agent cannot set: one they
                # no longer see changes how they run (a suite that tests more when RUN_FULL is
                # set skips it), as a check's own `env` changed does
                message = f"{name}: no longer {', '.join(removed)} (the sealed checks read it)"
                out.append(("weakened", message))
            elif removed:
                out.append(("strengthened", f"{name}: no longer {', '.join(removed)}"))
        elif name == "home":
            out.append(("weakened" if now == "user" else "strengthened", f"home {was} -> {now}"))
        else:  # python: another interpreter runs the pytest checks
            out.append(("weakened", f"python {was!r} -> {now!r}"))
    return out


def workspace_changes(
    old: Mapping[str, Any], new: Mapping[str, Any]
) -> list[tuple[Kind, str, str]]:
    """(kind, where, message) for each step of both plan contracts whose effective workspace (its
    own, else the plan's) changed: to ``live`` weakens, from ``live`` strengthens."""
    default = PLAN_DEFAULTS["workspace"]
    old_plan, new_plan = old.get("workspace", default), new.get("workspace", default)
    new_steps = {step_key(s["id"]): s for s in new["steps"]}
    out: list[tuple[Kind, str, str]] = []
    for step in old["steps"]:
        other = new_steps.get(step_key(step["id"]))
        if other is None:
            continue
        was = step.get("workspace") or old_plan
        now = other.get("workspace") or new_plan
        if was != now:
            kind: Kind = "weakened" if now == "live" else "strengthened"
            out.append((kind, f"step {step['id']}", f"workspace {was} -> {now}"))
    return out
