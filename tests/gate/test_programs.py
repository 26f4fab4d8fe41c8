"""What the checks' PATH finds and offers, and whether a run made here ran what this PATH offers
(gitaudit/pathsearch.py, gitaudit/ledger/programs.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gitaudit.crypto.keystore import generate_key, load_signer
from gitaudit.ledger.programs import Here
from gitaudit.pathsearch import Offers, checks_path, find, folders, found, offered
from gitaudit.places import cache_dir


def tool(folder: Path, name: str, *, executable: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755 if executable else 0o644)
    return path


def test_find_is_what_shutil_which_finds(tmp_path: Path) -> None:
    """The first entry holding an executable file by that name, links resolved: not a folder,
    not a file without the execute bit, nothing for a name found nowhere."""
    first, second = tmp_path / "first", tmp_path / "second"
    tool(first, "plain", executable=False)
    (first / "folder").mkdir()
    tool(second, "plain")
    tool(second, "folder")
    (first / "linked").symlink_to(tool(tmp_path / "elsewhere", "real"))
    path = f"{first}{os.pathsep}{second}{os.pathsep}{os.environ['PATH']}"
    for name in ("plain", "folder", "linked", "sh", "no-such-program-here"):
        which = shutil.which(name, path=path)
        assert find(name, path) == (os.path.realpath(which) if which else None), name
    assert find("linked", path) == str((tmp_path / "elsewhere" / "real").resolve())


def test_the_checks_path_drops_relative_entries_the_repository_the_cache_and_git_s_own(
    tmp_path: Path,
) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "bin").mkdir(parents=True)
    outside.mkdir()
    link = tmp_path / "link-into-work"
    link.symlink_to(work / "bin")
    cache = os.path.join(cache_dir(), "checkouts", "x", "0", "tree", "bin")
    value = os.pathsep.join(["", "bin", str(work / "bin"), str(link), cache, str(outside)])
    assert checks_path(value, [work]) == str(outside)
    # the folder git puts first for a command it starts (`git audit run`): not the user's
    core = tmp_path / "git-core"
    core.mkdir()
    assert checks_path(f"{core}{os.pathsep}{outside}", [work], str(core)) == str(outside)


def test_here_knows_the_keys_of_the_gitaudit_home_only(tmp_path: Path) -> None:
    mine = load_signer(generate_key("runner").private_path)
    other = generate_key("visitor", home=tmp_path / "other-home")
    here = Here([tmp_path])
    assert here.made_here(mine.public_key.fingerprint())
    assert not here.made_here(load_signer(other.private_path).public_key.fingerprint())
    assert not here.made_here(None)


def test_a_path_offers_a_program_from_any_of_its_folders_as_it_was_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offered: the folder it was found in is on PATH (in any place, or through a link to it)
    and still holds that executable. Not offered: a folder PATH lacks, a folder whose program
    now leads elsewhere, a program gone."""
    first = tool(tmp_path / "a", "frob")
    tool(tmp_path / "b", "frob")
    folder_a, folder_b = str((tmp_path / "a").resolve()), str((tmp_path / "b").resolve())
    (tmp_path / "to-a").symlink_to(tmp_path / "a")
    recorded = ("frob", folder_a, os.path.realpath(first))
    assert found("frob", f"{tmp_path / 'a'}:{tmp_path / 'b'}") == recorded[1:]
    for path in (f"{tmp_path / 'b'}:{tmp_path / 'a'}", str(tmp_path / "to-a")):
        assert Offers(path).unoffered([recorded]) is None, path
    assert Offers(str(tmp_path / "b")).unoffered([recorded]) == recorded
    assert Offers(str(tmp_path / "b")).unoffered([("frob", folder_b, recorded[2])]) is not None
    first.unlink()
    first.symlink_to(tmp_path / "b" / "frob")  # the folder's frob now leads elsewhere
    assert Offers(str(tmp_path / "a")).unoffered([recorded]) == recorded
    first.unlink()
    assert Offers(str(tmp_path / "a")).unoffered([recorded]) == recorded
    monkeypatch.setenv("PATH", str(tmp_path / "b"))
    assert offered([("frob", folder_b, os.path.realpath(tmp_path / "b" / "frob"))], [folder_b], [])
    assert not offered([], [folder_a], [])


def test_a_path_lacking_a_folder_of_the_run_s_path_offers_nothing(tmp_path: Path) -> None:
    """Whatever a check named, a folder of the run's PATH that this PATH lacks is where a
    program the check started could have found its own (``npm`` its ``node``)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "to-a").symlink_to(tmp_path / "a")
    offers = Offers(f"{tmp_path / 'to-a'}{os.pathsep}/usr/bin")
    assert offers.lacks([str((tmp_path / "a").resolve()), "/usr/bin"]) is None
    assert offers.lacks(["/usr/bin", str(tmp_path / "agent-bin")]) == str(tmp_path / "agent-bin")
    listed = folders(f"{tmp_path / 'to-a'}::{tmp_path / 'a'}/")
    assert listed == [str(tmp_path / "to-a"), str((tmp_path / "a").resolve())]


def test_a_run_made_here_binds_its_path_and_programs_a_run_made_elsewhere_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Here.binds: the run's PATH folders must all be this PATH's, and each program offered
    from its folder; what bound is collected for the memo; a run whose key the home does not
    hold (or an older run recording neither) is not asked."""
    from gitaudit.ledger.records import parse_run
    from tests.ledger.test_records import COMMIT, full_run

    frob = tool(tmp_path / "a", "frob")
    folder = str((tmp_path / "a").resolve())
    mine = load_signer(generate_key("runner").private_path).public_key.fingerprint()
    doc = full_run()
    doc["runner"]["fingerprint"] = mine
    doc["environment"]["path"] = [folder]
    for check in (doc["steps"]["build"]["checks"][0], doc["steps"]["build"]["outputs"]["wheel"][0]):
        check.update(program="frob", found_in=folder, executable=os.path.realpath(frob))
    run = parse_run(COMMIT, 0, doc)
    monkeypatch.setenv("PATH", f"/usr/bin{os.pathsep}{tmp_path / 'a'}")
    here = Here([tmp_path / "repo"])
    assert here.binds(run, "build") is None
    assert list(here.programs) == [("frob", folder, os.path.realpath(frob))]
    assert list(here.folders) == [folder]
    monkeypatch.setenv("PATH", "/usr/bin")
    why = Here([tmp_path / "repo"]).binds(run, "build")
    assert why is not None and folder in why and "does not hold" in why
    doc["environment"]["path"] = ["/usr/bin"]  # an older gitaudit's run lists only programs
    why = Here([tmp_path / "repo"]).binds(parse_run(COMMIT, 0, doc), "build")
    assert why is not None and "'frob'" in why and "does not offer" in why
    doc["runner"]["fingerprint"] = "SHA256:elsewhere"
    assert Here([tmp_path / "repo"]).binds(parse_run(COMMIT, 0, doc), "build") is None


def test_a_folder_reached_through_a_link_binds_as_spelled_too(tmp_path: Path) -> None:
    """A program may find its files by the folder it was started from (``python3`` reads the
    ``pyvenv.cfg`` above it): a run's folder ``v/bin``, a link to a folder this PATH holds, is
    listed as spelled too, which this PATH lacks; spellings that name the same folder
    (``//``, ``.``, a trailing ``/``) are one."""
    system = tmp_path / "system" / "bin"
    system.mkdir(parents=True)
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "bin").symlink_to(system)
    run = folders(f"{tmp_path / 'v' / 'bin'}{os.pathsep}{system}")
    assert run == [str(tmp_path / "v" / "bin"), str(system.resolve())]
    assert Offers(str(system)).lacks(run) == str(tmp_path / "v" / "bin")
    assert Offers(f"{system}{os.pathsep}{tmp_path / 'v' / 'bin'}").lacks(run) is None
    spelled = f"/{system}//{os.pathsep}{system}/./{os.pathsep}{system}/"
    assert folders(spelled) == [str(system)]
    assert Offers(str(system)).lacks(folders(spelled)) is None


@pytest.mark.parametrize("how", ["a-file", "unlistable"])
def test_a_keys_folder_that_cannot_be_listed_holds_every_key(tmp_path: Path, how: str) -> None:
    """Globbing a keys folder that is a file, or that cannot be listed, finds nothing, which
    would make no run "made here" and ask none: such a home is taken to hold every key."""
    from gitaudit.crypto.keystore import keys_dir

    generate_key("runner")
    folder = keys_dir()
    assert not Here([tmp_path]).made_here("SHA256:anything")
    if how == "a-file":
        moved = folder.rename(tmp_path / "keys")
        folder.write_text("not a folder\n")
        assert Here([tmp_path]).made_here("SHA256:anything")
        folder.unlink()
        moved.rename(folder)
        return
    folder.chmod(0o300)  # writable and searchable, not readable: root still reads it
    try:
        assert Here([tmp_path]).made_here("SHA256:anything") is not os.access(folder, os.R_OK)
    finally:
        folder.chmod(0o700)


def test_the_keys_held_are_read_as_the_keystore_reads_them(tmp_path: Path) -> None:
    """held_keys (standard library, for every judgement) gives the fingerprints the keystore
    gives for the same pairs; a public key without its private half is no pair; a public key
    that does not parse makes the folder unreadable (every key held)."""
    from gitaudit.crypto.keystore import keys_dir, list_local_keys
    from gitaudit.ledger.programs import held_keys

    assert held_keys() == frozenset()  # no keys folder yet
    for name in ("runner", "sealer"):
        generate_key(name)
    (keys_dir() / "stray.pub").write_text((keys_dir() / "runner.pub").read_text())
    assert held_keys() == frozenset(k.fingerprint for k in list_local_keys())
    assert len(held_keys() or ()) == 2
    (keys_dir() / "broken").write_text("")
    (keys_dir() / "broken.pub").write_text("ssh-ed25519 not*base64\n")
    assert held_keys() is None


def test_folders_the_user_trusts_in_the_gitaudit_home_count_as_the_judge_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder a host puts on its agent's shell's PATH only: listed in the home's
    trusted-path, a run made with it binds; a comment, a relative line or another folder
    trusts nothing else."""
    from gitaudit.pathsearch import TRUSTED_FILE
    from gitaudit.places import home_dir

    frob = tool(tmp_path / "gnubin", "frob")
    folder = str((tmp_path / "gnubin").resolve())
    ran = [("frob", folder, os.path.realpath(frob))]
    monkeypatch.setenv("PATH", "/usr/bin")
    assert not offered(ran, [folder], [])
    trusted = Path(home_dir()) / TRUSTED_FILE
    trusted.parent.mkdir(parents=True, exist_ok=True)
    trusted.write_text(f"# the host's gnubin\ngnubin\n{tmp_path / 'other'}\n")
    assert not offered(ran, [folder], [])
    trusted.write_text(f"# the host's gnubin\n{tmp_path / 'gnubin'}\n")
    assert offered(ran, [folder], [])
    here = Here([tmp_path / "repo"])
    assert here.offers.lacks([folder]) is None and here.offers.unoffered(ran) is None


def test_a_run_made_here_binds_the_filter_drivers_its_checkout_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Here.binds: the content filter drivers a run made here recorded must be the ones the
    global git configuration read here defines (no more, no fewer settings); what bound is
    collected for the memo; a run made elsewhere is not asked. A malformed driver is named."""
    from gitaudit.errors import LedgerError
    from gitaudit.ledger.records import parse_run
    from tests.gitrepo import git
    from tests.ledger.test_records import COMMIT, full_run

    git(tmp_path, "config", "--global", "filter.lfs.smudge", "git-lfs smudge -- %f")
    git(tmp_path, "config", "--global", "filter.lfs.clean", "git-lfs clean -- %f")
    mine = load_signer(generate_key("runner").private_path).public_key.fingerprint()
    doc = full_run()
    doc["runner"]["fingerprint"] = mine
    doc["environment"].pop("path", None)
    entry = doc["steps"]["build"]
    for check in [*entry["checks"], *(c for g in entry.get("outputs", {}).values() for c in g)]:
        for name in ("program", "found_in", "executable"):
            check.pop(name, None)
    for upstream in entry.get("upstream", []):
        for check in upstream.get("checks", []):
            check.pop("program", None)
    drivers = {"lfs.clean": "git-lfs clean -- %f", "lfs.smudge": "git-lfs smudge -- %f"}
    doc["workspace"]["filters"] = dict(drivers)
    run = parse_run(COMMIT, 0, doc)
    assert run.filters == drivers
    here = Here([tmp_path / "repo"])
    assert here.binds(run, "build") is None
    assert here.filters == drivers
    for changed in ({"lfs.smudge": "sed s/broken/ok/"}, {"lfs.process": "x"}):
        doc["workspace"]["filters"] = {**drivers, **changed}
        why = Here([tmp_path / "repo"]).binds(parse_run(COMMIT, 0, doc), "build")
        assert why is not None and "content filter driver lfs." in why, why
    other = tmp_path / "other.gitconfig"
    other.write_text('[filter "lfs"]\n\tsmudge = sed s/broken/ok/\n\tclean = cat\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(other))  # the judge's own: asked as git reads it
    doc["workspace"]["filters"] = dict(drivers)
    why = Here([tmp_path / "repo"]).binds(parse_run(COMMIT, 0, doc), "build")
    assert why is not None and "lfs.clean=git-lfs clean -- %f" in why
    doc["runner"]["fingerprint"] = "SHA256:elsewhere"
    assert Here([tmp_path / "repo"]).binds(parse_run(COMMIT, 0, doc), "build") is None
    doc["workspace"]["filters"] = {"lfs.smudge": 1}
    with pytest.raises(LedgerError, match=r"workspace\.filters"):
        parse_run(COMMIT, 0, doc)
