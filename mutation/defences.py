"""`make mutate-defences`: remove each named defence of docs/threat-model.md by hand, and check
that the tests the threat model cites for it fail.

mutmut samples mutants at random; the defences below are the ones an audit found unguarded, so
each is removed exactly (a condition made false, a rule dropped) in a scratch copy under
``build/mutate/defences/<name>/``, and each cited test, a unit-level one and an end-to-end one,
is run there and must fail. ``tests/test_docs_ledger.py`` checks that the threat model's table
cites the same tests as this list.

    python mutation/defences.py [NAME ...]

Exit status 0 when every cited test fails with its defence removed, else 1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "mutate" / "defences"

_SEALS = (
    "tests/ledger/test_seals.py::"
    "test_a_sealer_signed_plans_commit_that_breaks_a_sealing_rule_is_refused"
)
_HOOKS = (
    "tests/adversarial/test_hooks.py::"
    "test_attack_hooks_sealing_rule_broken_by_a_sealer_signed_commit"
)


@dataclass(frozen=True)
class Defence:
    name: str  # as the threat model's table names it
    path: str
    present: str  # the code of the defence, exactly once in *path*
    removed: str  # what it becomes
    tests: tuple[str, ...]  # a unit-level test, then an end-to-end one


def _seal_rule(name: str, case: str, present: str, removed: str) -> Defence:
    path = "gitaudit/ledger/plansref.py"
    return Defence(name, path, present, removed, (f"{_SEALS}[{case}]", f"{_HOOKS}[{case}]"))


DEFENCES = (
    Defence(
        "the gate checks requirement coverage itself",
        "gitaudit/gate/evidence.py",
        "            for req in uncovered(j.plan, verified)\n",
        "            for req in uncovered(j.plan, verified) if False\n",
        (
            "tests/gate/test_evidence.py::"
            "test_a_mandatory_requirement_no_verified_step_covers_is_refused",
            "tests/adversarial/test_evidence.py::test_attack_evidence_requirement_left_uncovered",
        ),
    ),
    Defence(
        "the lookup cache's answer has no newer run for the tree",
        "gitaudit/ledger/lookup.py",
        "        if marker in commit.message:\n",
        "        if False:\n",
        (
            "tests/ledger/test_lookup.py::test_a_newer_run_for_the_tree_refuses_the_answer",
            "tests/adversarial/test_evidence.py::"
            "test_attack_evidence_lookup_index_forgets_the_newer_failing_run",
        ),
    ),
    _seal_rule(
        "a weakening must be recorded",
        "weakening not recorded",
        "if weakened and not new.weakened:",
        "if False:",
    ),
    _seal_rule(
        "no weakening where the policy forbids it",
        "weakening the policy forbids",
        "if weakened and not before.policy.allow_weaken:",
        "if False:",
    ),
    _seal_rule(
        "seal versions never go back",
        "seal version lowered",
        "if new.version < old.version:",
        "if False:",
    ),
    _seal_rule(
        "a seal record is never deleted",
        "seal record deleted",
        '        if new is None:\n            return f"{where} deletes',
        '        if False:\n            return f"{where} deletes',
    ),
    _seal_rule(
        "a policy that forbids weakening is not relaxed",
        "locked policy relaxed",
        "        _policy_problem(before, after, where)\n        or _resets_problem",
        "        None\n        or _resets_problem",
    ),
    Defence(
        "pre-receive: no unknown `refs/audit/*` ref",
        "gitaudit/hooks/entry.py",
        '    return "unknown audit ref"\n',
        "    return None\n",
        (
            "tests/hooks/test_pre_receive.py::test_an_audit_ref_gitaudit_does_not_define_is_refused",
            "tests/adversarial/test_hooks.py::test_attack_hooks_unknown_audit_ref",
        ),
    ),
    Defence(
        "pre-receive: audit refs are linear",
        "gitaudit/hooks/entry.py",
        'what="ref", linear=True)',
        'what="ref")',
        (
            "tests/hooks/test_pre_receive.py::test_a_merge_on_the_runs_ref_is_refused",
            "tests/adversarial/test_hooks.py::test_attack_hooks_merge_on_the_runs_ref",
        ),
    ),
    Defence(
        "the fingerprint keeps no untracked cache",
        "gitaudit/git/environment.py",
        '    "-c",\n    "core.untrackedCache=false",\n',
        "",
        (
            "tests/test_fingerprint.py::test_kept_index_carries_no_untracked_cache_of_the_users_index",
            "tests/e2e/test_fingerprint.py::"
            "test_an_untracked_cache_in_the_users_index_is_neither_kept_nor_believed",
        ),
    ),
    Defence(
        "git's stat comparison in full, whatever the config",
        "gitaudit/git/environment.py",
        '    "-c",\n    "core.checkStat=default",\n    "-c",\n    "core.trustctime=true",\n',
        "",
        (
            "tests/test_fingerprint.py::test_config_cannot_blind_the_stat_comparison",
            "tests/adversarial/test_workspace.py::"
            "test_attack_workspace_config_blinds_the_stat_comparison",
        ),
    ),
    Defence(
        "the purity check writes the checkout's git settings again",
        "gitaudit/run/checkout.py",
        "    _own_settings(git_dir, ignored_paths)\n    return True\n",
        "    return True\n",
        (
            "tests/run/test_checkout.py::test_the_checks_cannot_blind_the_purity_check",
            "tests/adversarial/test_caches.py::test_attack_caches_check_leaves_the_slot_git_dir"
            "_to_the_run[fsmonitor program, index rewritten]",
        ),
    ),
    Defence(
        "the fingerprint's stat data are its own",
        "gitaudit/git/fingerprint.py",
        "    finally:\n"
        "        with contextlib.suppress(FileNotFoundError):\n"
        "            user.unlink()\n"
        "    # git takes executable bits from the index, not the disk, under core.fileMode=false: "
        "the\n"
        "    # user's modes then count like its paths\n"
        "    modes = _index_modes(layout, env)\n",
        "    finally:\n"
        "        with contextlib.suppress(FileNotFoundError):\n"
        "            os.replace(user, temp)\n"
        "    modes = True\n",
        (
            "tests/test_fingerprint.py::test_the_stat_data_of_the_users_index_is_not_trusted[kept]",
            "tests/adversarial/test_workspace.py::"
            "test_attack_workspace_forged_index_stat_cache[after-a-run]",
        ),
    ),
    Defence(
        "a kept index is used only with its own tag",
        "gitaudit/git/index_files.py",
        "    if not hmac.compare_digest(tagged.mac, secret.mac(key, statement)):\n"
        "        return None\n",
        "",
        (
            "tests/test_fingerprint.py::test_a_kept_index_without_its_own_tag_is_not_used"
            "[another-files]",
            "tests/test_head_start.py::test_a_kept_index_written_by_someone_else_is_not_taken"
            "[replaced]",
            "tests/adversarial/test_workspace.py::"
            "test_attack_workspace_forged_fingerprint_state[kept-renamed-over]",
        ),
    ),
    Defence(
        "the retry rules' tallies are believed only under their MAC",
        "gitaudit/ledger/index.py",
        "    if not hmac.compare_digest(str(row[2]), tallies_mac(key, plan, tip, str(row[1]))):\n"
        "        return None\n",
        "",
        (
            "tests/ledger/test_tallies.py::test_tallies_that_do_not_hold_are_counted_again[zeroed]",
            "tests/adversarial/test_attempts.py::test_attack_attempts_lookup_cache_forgets_the_failures"
            "[the failures zeroed]",
        ),
    ),
    Defence(
        "a plan skips the schema check only with its own mark",
        "gitaudit/plan/known_valid.py",
        "        return key is not None and _mark(key, data) in self._read()\n",
        "        return True\n",
        (
            "tests/plan/test_known_valid.py::test_a_mark_binds_the_version_the_schema_and_the_key"
            "[key]",
            "tests/adversarial/test_plans.py::"
            "test_attack_plans_schema_check_skipped_by_forged_marks[copied]",
        ),
    ),
)


def check(defence: Defence, slug: str) -> list[str]:
    """The cited tests that still pass with *defence* removed (each must fail)."""
    work = BUILD / slug
    shutil.rmtree(work, ignore_errors=True)
    for folder in ("gitaudit", "tests", "docs", "hooks"):
        shutil.copytree(ROOT / folder, work / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", work)
    source = work / defence.path
    text = source.read_text(encoding="utf-8")
    if text.count(defence.present) != 1:
        raise SystemExit(f"{defence.path}: the code of {defence.name!r} is not found exactly once")
    source.write_text(text.replace(defence.present, defence.removed), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(work)}
    passing = []
    for test in defence.tests:
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
        proc = subprocess.run(
            [*argv, test], cwd=work, env=env, capture_output=True, text=True, check=False
        )
        failed = proc.returncode == 1  # 1: tests ran and failed (not a usage or collection error)
        print(f"{'caught' if failed else 'MISSED'}: {defence.name}: {test}", flush=True)
        if not failed:
            passing.append(test)
    shutil.rmtree(work)
    return passing


def main() -> int:
    wanted = set(sys.argv[1:])
    missed = []
    for number, defence in enumerate(DEFENCES, 1):
        if wanted and str(number) not in wanted and defence.name not in wanted:
            continue
        missed += check(defence, f"d{number:02}")
    print(f"== defences: {len(missed)} cited test(s) still pass with their defence removed")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
