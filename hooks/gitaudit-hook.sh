#!/bin/sh
# gitaudit hook shim (gitaudit-hook-shim v2). Installed by `git audit hooks install`, which
# upgrades it in place; `git audit hooks uninstall` restores the hook that was here before.
# It calls back into the installed gitaudit package through its lean hook entry point; -P, so
# that the folder git runs it in (the work tree: anything may be there) does not come first.
# (-c, not -m gitaudit.hooks, which still works: runpy would cost every hook about 2 ms.)
PYTHON='@PYTHON@'
RUN='from gitaudit.hooks.entry import run; run()'
name=$(basename "$0")
legacy="$0.legacy"
if [ -x "$legacy" ]; then
    case "$name" in
    pre-push|pre-receive)
        input=$(mktemp) || exit 1
        cat >"$input"
        "$legacy" "$@" <"$input" || { rc=$?; rm -f "$input"; exit $rc; }
        "$PYTHON" -P -c "$RUN" "$name" "$@" <"$input"
        rc=$?
        rm -f "$input"
        exit $rc
        ;;
    *)
        "$legacy" "$@" || exit $?
        ;;
    esac
fi
exec "$PYTHON" -P -c "$RUN" "$name" "$@"
