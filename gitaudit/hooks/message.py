"""Commit messages, for the commit-msg hook: completion claims, and the ``Audit-*`` trailers the
hook owns.

Standard library only, and light: the hooks' fast path imports it.

**Claims.** A message claims completion (case-insensitive; comment lines and everything below
git's scissors line ignored) when it has

* an ``Audit-Claim`` trailer saying ``done`` (``Audit-Claim: done``, ``Audit-Claim:done``,
  ``audit-claim: Done.``) or naming a requirement of the plans (``Audit-Claim: REQ-1``);
* a completion verb (close, fix, resolve, complete, implement, finish, done, in their usual
  forms) followed by requirement ids, with any punctuation or brackets between them and an
  optional ``#`` before each id: ``Closes REQ-1``, ``Fixes: REQ-1``, ``fixed:REQ-1``,
  ``[done] REQ-1``, ``closes #REQ-1``, ``Resolves REQ-3, REQ-1 and REQ-2``;
* a requirement id followed by a completion word: ``REQ-1: done``, ``[REQ-1] completed``,
  ``REQ-1 is fixed``.

An id counts when it is exactly a requirement of a plan in the judged tree, of a plan sealed as
active or of a sealed request (the hook passes them; ``REQ-10`` is not
``REQ-1``; a trailing ``.`` ``,`` ``)`` and the like are punctuation). A verb directly negated or
qualified as partial (``doesn't fix REQ-1 yet``, ``does not close REQ-1``, ``partially fixes
REQ-1``, ``REQ-1 is not done``) is no claim: blocking such a message would only teach people to
word around the detector. It is a pattern match, not an understanding of the message; strict
mode blocks every commit without PASS instead.

**Trailers.** The hook writes ``Audit-Verdict`` and one ``Audit-Run`` per plan with evidence. Any
line of the message that looks like an ``Audit-*`` trailer other than ``Audit-Claim`` (what the
hook writes, and the ledger's own ``Audit-Plan``, ``Audit-Tree``, ... which have no business in a
branch commit) is removed first, wherever it stands: only the hook says what the gate said.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import re
    from collections.abc import Iterator

SCISSORS = "# ------------------------ >8 ------------------------"
CLAIM_KEY = "audit-claim"

_VERB = (
    r"close[sd]?|closing|fix(?:e[sd])?|fixing|resolve[sd]?|resolving|complete[sd]?|completing"
    r"|implement(?:s|ed|ing)?|finish(?:e[sd]|ing)?|done"
)
_DONE = r"done|complete[d]?|fixed|resolved|closed|implemented|finished"
_ID = r"#?[A-Za-z0-9][A-Za-z0-9._-]*"
_NOT = (
    r"(?:not|never|no|\w+n[’']t|partially|partly)\s+"
    r"(?:(?:yet|fully|completely|entirely|quite|really)\s+)?"
)
_BETWEEN = r"[ \t\])}>:=*_~\-–—]*"  # punctuation, closing brackets, markdown between verb and ids
_VERB_FIRST = (
    rf"(?<![\w-])(?P<verb>{_VERB})\b{_BETWEEN}"
    rf"(?P<ids>{_ID}(?:[ \t]*(?:,|;|/|&|\+|\band\b)[ \t]*{_ID})*)"
)
_ID_FIRST = (
    rf"(?<![\w.#-])(?P<id>{_ID})[ \t\])}}:=\-–—]*(?:(?:is|are|now|been|has|have)[ \t]+)*"
    rf"(?P<neg>{_NOT}|isn[’']t\s+|aren[’']t\s+)?(?P<word>{_DONE})\b"
)


def body(message: str) -> list[str]:
    """The lines git keeps: comment lines and everything from the scissors line on dropped."""
    lines = []
    for line in message.split("\n"):  # as git: str.splitlines also cuts at U+2028 and more,
        line = line.removesuffix("\r")  # and made a comment of the rest of a line git keeps
        if line == SCISSORS:
            break
        if not line.startswith("#"):
            lines.append(line)
    return lines


def _trailer_key(line: str) -> str | None:
    """The key of *line* when it is shaped like a git trailer (``Key: value``), lower-cased."""
    key, colon, _ = line.partition(":")
    key = key.rstrip()
    if not colon or not key or not all(c.isalnum() or c == "-" for c in key):
        return None
    return key.lower()


def owned(line: str) -> bool:
    """Whether *line* is an ``Audit-*`` trailer the hook owns (all but ``Audit-Claim``)."""
    key = _trailer_key(line)
    return key is not None and key.startswith("audit-") and key != CLAIM_KEY


def without_owned_trailers(message: str) -> str:
    """*message* without the ``Audit-*`` trailer lines the hook owns (and their continuation
    lines), above the scissors line; blank lines left at the end by the removal go too."""
    lines = message.splitlines(keepends=True)
    cut = next((n for n, line in enumerate(lines) if line.rstrip("\r\n") == SCISSORS), len(lines))
    kept: list[str] = []
    dropping = False
    for line in lines[:cut]:
        if dropping and line[:1] in (" ", "\t") and line.strip():
            continue  # a folded continuation of the trailer being dropped
        dropping = owned(line)
        if not dropping:
            kept.append(line)
    if len(kept) == cut:
        return message
    last = max((n for n, line in enumerate(kept) if line.strip() and line[0] != "#"), default=-1)
    kept = kept[: last + 1] + [line for line in kept[last + 1 :] if line.strip()]
    if last >= 0 and not kept[last].endswith("\n"):
        kept[last] += "\n"
    return "".join(kept + lines[cut:])


def _known(token: str, ids: set[str]) -> str | None:
    token = token.lstrip("#")
    for candidate in (token, token.rstrip("._-")):
        if candidate.lower() in ids:
            return candidate
    return None


def claims_completion(message: str, requirement_ids: set[str]) -> str | None:
    """The completion claim *message* makes (the words that make it), if any."""
    import re  # not at module level: the hooks' fast path does without it

    ids = {i.lower() for i in requirement_ids}
    lines = body(message)
    for line in lines:
        if _trailer_key(line) == CLAIM_KEY:
            value = line.partition(":")[2].strip()
            first = re.split(r"[\s.,;:!]+", value, maxsplit=1)[0].lower()
            tokens = re.findall(_ID, value)
            if first in ("done", "complete", "completed", "finished") or any(
                _known(t, ids) for t in tokens
            ):
                return line.strip()
    text = "\n".join(lines)
    negated = re.compile(rf"(?:^|\W){_NOT}$", re.IGNORECASE)
    for match in _matches(re.compile(_VERB_FIRST, re.IGNORECASE), text):
        before = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
        if not negated.search(before) and any(
            _known(t, ids) for t in re.findall(_ID, match.group("ids"))
        ):
            return match.group(0).strip()
    for match in _matches(re.compile(_ID_FIRST, re.IGNORECASE), text):
        if not match.group("neg") and _known(match.group("id"), ids):
            return match.group(0).strip()
    return None


def _matches(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """Every match of *pattern*, overlapping ones too: a candidate that is no claim (``finish
    Fixes: REQ-1`` reads ``Fixes`` as an id) must not hide the claim it overlaps."""
    pos = 0
    while (match := pattern.search(text, pos)) is not None:
        yield match
        pos = match.start() + 1
