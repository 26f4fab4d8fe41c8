"""pygit2 loaded without TLS set-up, in the processes gitaudit starts itself.

Importing pygit2 imports Python's ``ssl`` module (with ``socket`` and OpenSSL's tables: about
4.5 ms) only to ask it for OpenSSL's default CA locations, and hands them to libgit2, which
parses the whole CA bundle file there and then (about 7 ms for Debian's 220 KB bundle). Both
were paid by every hook. gitaudit never connects to anything through libgit2: it reads remotes
by name, and fetching and pushing are git's own.

:func:`install` makes the first ``import pygit2`` of this process see a stand-in ``ssl`` module
while pygit2's module runs: it names no CA bundle and the null device as the CA folder, so
libgit2 is given no certificate at all (a TLS connection through it could verify no server:
it fails closed), and the real ``ssl`` is neither imported nor read. Any other public name
pygit2 asks the stand-in for is the real module's (imported then). Whatever ``sys.modules``
held under ``ssl`` before (the real module, or nothing) is put back right after, so a later
``import ssl`` gets the real one; the environment is never touched.

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
SSL = "ssl"
REAL = "_real"  # where the stand-in keeps the real ssl, once it had to import it
NO_CA_FOLDER = os.devnull  # not a folder: OpenSSL finds no certificate in it, and none is put there


def install() -> None:
    """Give this process's first ``import pygit2`` the stand-in ``ssl`` (once)."""
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
            loader.exec_module = _without_tls(loader.exec_module)  # type: ignore[method-assign,assignment]
        return spec


def _without_tls(exec_module: Callable[[ModuleType], None]) -> Callable[[ModuleType], None]:
    """*exec_module* run with :func:`stand_in` as ``ssl``; ``sys.modules`` gets back what it
    held under that name however the import ends."""

    def run(module: ModuleType) -> None:
        saved = sys.modules.get(SSL)
        standing = sys.modules[SSL] = stand_in()
        try:
            exec_module(module)
        finally:
            # the real module, if the stand-in imported it meanwhile, or what was there before
            back = saved if saved is not None else standing.__dict__.get(REAL)
            if back is None:
                del sys.modules[SSL]
            else:
                sys.modules[SSL] = back

    return run


def stand_in() -> ModuleType:
    """The ``ssl`` pygit2 is given: default verify paths with no CA bundle and no CA folder;
    any other name is the real module's."""
    from collections import namedtuple
    from types import ModuleType

    DefaultVerifyPaths = namedtuple(  # ssl.DefaultVerifyPaths' fields, in their order
        "DefaultVerifyPaths",
        "cafile capath openssl_cafile_env openssl_cafile openssl_capath_env openssl_capath",
    )
    module = ModuleType(SSL, "pygit2's view of ssl while gitaudit loads it: no certificates")
    module.__dict__["DefaultVerifyPaths"] = DefaultVerifyPaths
    module.__dict__["get_default_verify_paths"] = lambda: DefaultVerifyPaths(
        None, NO_CA_FOLDER, "SSL_CERT_FILE", None, "SSL_CERT_DIR", NO_CA_FOLDER
    )

    def real(name: str) -> object:
        if name.startswith("__"):  # the import system's questions (``__path__``): not ssl's
            raise AttributeError(name)
        import importlib

        if sys.modules.get(SSL) is not module:
            return getattr(importlib.import_module(SSL), name)
        del sys.modules[SSL]  # this stand-in: import the real module past it
        try:
            module.__dict__[REAL] = importlib.import_module(SSL)
        finally:
            sys.modules[SSL] = module
        return getattr(module.__dict__[REAL], name)

    module.__dict__["__getattr__"] = real  # PEP 562: asked for a name the module lacks
    return module
