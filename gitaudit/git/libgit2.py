"""pygit2 loaded without reading the CA bundle, in the processes gitaudit starts itself.

Importing pygit2 points libgit2 at OpenSSL's default CA locations, and libgit2 parses the whole
CA bundle file there and then: about 7 ms for Debian's 220 KB bundle, a quarter of what a
pre-push hook does once it is loaded. gitaudit never connects to anything through libgit2 (it
reads remotes by name; fetching and pushing are git's own). :func:`install` makes the first
``import pygit2`` of this process see no CA bundle file (``SSL_CERT_FILE`` names the null device
while pygit2's module runs, and is restored right after): libgit2 keeps the CA folder, whose
certificates OpenSSL reads one by one when a connection needs them. When there is no CA folder,
nothing is hidden: pygit2 refuses to load with neither.

The finder only wraps pygit2's own loader, found the normal way; it leaves ``sys.meta_path`` at
the first ``import pygit2``, and does nothing when pygit2 is already loaded.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing costs about 6 ms: this runs before any command
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

MODULE = "pygit2"
VARIABLE = "SSL_CERT_FILE"


def install() -> None:
    """Hide the CA bundle file from this process's first ``import pygit2`` (once)."""
    if MODULE in sys.modules or any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _Finder())


class _Finder:
    """A one-shot import finder for pygit2 (see the module's docstring)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != MODULE:
            return None
        sys.meta_path.remove(self)
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(fullname, path, target)
        loader = spec.loader if spec is not None else None
        if loader is not None and hasattr(loader, "exec_module"):
            loader.exec_module = _without_bundle(loader.exec_module)  # type: ignore[method-assign,assignment]
        return spec


def _without_bundle(exec_module: Callable[[ModuleType], None]) -> Callable[[ModuleType], None]:
    """*exec_module* run with ``SSL_CERT_FILE`` naming the null device, when there is a CA
    folder to keep; the variable is restored as it was (set or not) however the import ends."""

    def run(module: ModuleType) -> None:
        if _ca_folder() is None:
            exec_module(module)
            return
        saved = os.environ.get(VARIABLE)
        os.environ[VARIABLE] = os.devnull
        try:
            exec_module(module)
        finally:
            if saved is None:
                del os.environ[VARIABLE]
            else:
                os.environ[VARIABLE] = saved

    return run


def _ca_folder() -> str | None:
    """The CA folder libgit2 would be given (``SSL_CERT_DIR`` or OpenSSL's default), if any."""
    import ssl  # pygit2 imports it anyway

    return ssl.get_default_verify_paths().capath
