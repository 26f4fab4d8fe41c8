"""The hook commands: ``git audit agent stop`` and ``git audit agent guard`` (also
``python -m gitaudit.agent stop|guard``), answered without typer.

Both read the host's JSON on stdin and fail closed: a payload that is not a JSON object, a
repository that cannot be read, any exception at all becomes a block (stop) or a refusal (guard)
whose reason says what went wrong, never an allow. Standard library at import; the gate is
imported only when the verdict memo cannot answer.
"""

from __future__ import annotations

import os
import sys

from gitaudit.agent.hosts import DEFAULT_HOST, HOSTS, Answer, reply

TYPE_CHECKING = False  # not typing's: the agent hooks do without typing (gitaudit.named)
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gitaudit.agent.hosts import Hook

USAGE = f"usage: git audit agent {{stop|guard}} [--host {{{'|'.join(HOSTS)}}}]"


def parse_args(args: Sequence[str]) -> tuple[Hook, str] | None:
    """(hook, host) from ``stop|guard [--host HOST]``; None when the arguments are not that."""
    if not args or args[0] not in ("stop", "guard"):
        return None
    hook: Hook = "stop" if args[0] == "stop" else "guard"
    host = DEFAULT_HOST
    rest = list(args[1:])
    while rest:
        opt = rest.pop(0)
        if opt.startswith("--host="):
            host = opt.split("=", 1)[1]
        elif opt == "--host" and rest:
            host = rest.pop(0)
        else:
            return None
        if host not in HOSTS:
            return None
    return hook, host


def answer(hook: Hook, raw: bytes) -> Answer:
    """The decision of *hook* for the payload *raw*; every failure is a block or a refusal."""
    try:
        if hook == "stop":
            from gitaudit.agent import stop

            return stop.decide(raw)
        from gitaudit.agent import guard

        return guard.decide(raw)
    except (Exception, SystemExit) as exc:  # fail closed, whatever went wrong
        return failed_closed(hook, exc)


def failed_closed(hook: Hook, exc: BaseException) -> Answer:
    from gitaudit.errors import GitAuditError

    if isinstance(exc, GitAuditError):
        detail = exc.message + (f" (fix: {exc.hint})" if exc.hint else "")
    else:
        detail = f"{type(exc).__name__}: {exc}"
    if os.environ.get("GITAUDIT_DEBUG"):
        import traceback

        detail += "\n" + "".join(traceback.format_exception(exc))
    if hook == "stop":
        return Answer(
            False,
            f"gitaudit could not judge the work tree, so stopping is blocked: {detail}\n"
            "Fix the cause, then check with `git audit status` before stopping again.",
        )
    return Answer(
        False,
        f"gitaudit's guard could not check this tool call, so it is refused: {detail}",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parsed = parse_args(args)
    if parsed is None:
        sys.stderr.write(USAGE + "\n")
        return 2  # a usage error blocks too: 2 is the hosts' block
    hook, host = parsed
    try:
        raw = sys.stdin.buffer.read()
    except (OSError, ValueError, AttributeError) as exc:
        decision = failed_closed(hook, exc)
    else:
        decision = answer(hook, raw)
    out = reply(host, hook, decision)
    for stream, text in ((sys.stdout, out.stdout), (sys.stderr, out.stderr)):
        buffer = getattr(stream, "buffer", None)
        if text and buffer is not None:  # UTF-8 whatever the locale says, as hosts read it
            stream.flush()
            buffer.write(text.encode("utf-8", "replace"))
            buffer.flush()
        elif text:
            stream.write(text)
    return out.code
