"""What the checks' PATH finds and offers, and whether a run made here ran what this PATH offers
(gitaudit/pathsearch.py, gitaudit/ledger/programs.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gitaudit.crypto.keystore import generate_key, load_signer
from gitaudit.ledger.programs import Here
from gitaudit.pathsearch import Offers, checks_path, find, found, unoffered
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


def test_the_checks_path_drops_relative_entries_the_repository_and_the_cache(
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
    assert unoffered([("frob", folder_b, os.path.realpath(tmp_path / "b" / "frob"))], []) is None


def test_here_names_the_first_program_not_offered_and_keeps_what_it_relied_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frob = tool(tmp_path / "a", "frob")
    monkeypatch.setenv("PATH", f"{tmp_path / 'a'}{os.pathsep}{os.environ['PATH']}")
    sh = found("sh", os.environ["PATH"])
    assert sh is not None
    programs = [("frob", str((tmp_path / "a").resolve()), os.path.realpath(frob)), ("sh", *sh)]
    here = Here([tmp_path / "repo"])
    assert here.unoffered(programs) is None
    assert list(here.relied) == programs
    stranger = ("frob", str(tmp_path / "agent-bin"), os.path.realpath(frob))
    assert Here([tmp_path / "repo"]).unoffered([programs[1], stranger]) == stranger
