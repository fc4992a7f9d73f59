"""Modules lmms-eval imports at start-up that the fast path never uses, imported on first use.

``import lmms_eval.evaluator`` (and every lmms-eval module the fast path needs: models, tasks,
evaluator_utils) imports ``lmms_eval.api.registry``, whose first line is ``import evaluate as
hf_evaluate``; Hugging Face ``evaluate`` imports ``transformers.pipelines``, torchvision and
scipy.stats: 2.4 of the 5.0 CPU seconds lmms-eval's import costs on our 2-core machine. lmms-eval
calls ``hf_evaluate.load`` only for a task metric it does not know itself (``get_metric(...,
hf_evaluate_metric=True)``); the EDCT tasks' metrics are their own hooks.

``defer_imports`` puts a ``DeferredModule`` in ``sys.modules`` for such a module before lmms-eval is
imported: ``import evaluate`` then binds it, and the first attribute anyone reads from it (``load``,
a submodule, ``__path__``, …) imports the real module and answers from it; from then on
``sys.modules`` holds the real one. Nothing else changes: a task that needs ``evaluate`` gets it.

``imports_refused`` is for the other kind: optional imports lmms-eval attempts (and survives
failing) in code the fast path calls, for tasks that are not the ones being run.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

UNUSED_BY_THE_FAST_PATH = ("evaluate",)
"""Imported by lmms-eval at start-up, used only for metrics the EDCT tasks do not have."""

_LOCK = threading.RLock()


class DeferredModule(types.ModuleType):
    """A stand-in for a module not imported yet; reading any attribute it does not carry imports the
    real module (once) and returns that attribute of it.

    It carries what the import machinery and ``inspect`` read from every module in ``sys.modules``
    (``__name__``, ``__spec__``, ``__file__``, ``__loader__``, ``__package__``), so those do not
    import it; ``__path__`` is left out on purpose: importing a submodule reads it, and a package's
    submodule needs the real package first.
    """

    def __init__(self, spec: Any) -> None:
        super().__init__(spec.name)
        self.__spec__ = spec
        self.__file__ = spec.origin
        self.__loader__ = spec.loader
        self.__package__ = spec.parent

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.real_module(), attr)

    def real_module(self) -> types.ModuleType:
        """The real module, imported on the first call."""
        real = self.__dict__.get("_real")
        if real is not None:
            return real
        with _LOCK:
            real = self.__dict__.get("_real")
            if real is None:
                if sys.modules.get(self.__name__) is self:
                    del sys.modules[self.__name__]
                real = importlib.import_module(self.__name__)
                self.__dict__["_real"] = real
        return real


def defer_imports(names: tuple[str, ...] = UNUSED_BY_THE_FAST_PATH) -> list[str]:
    """Put a ``DeferredModule`` in ``sys.modules`` for each of ``names`` that is installed and not
    imported yet; returns the names deferred."""
    deferred = []
    with _LOCK:
        for name in names:
            if name in sys.modules:
                continue
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None:
                continue  # not installed: whoever imports it gets the usual error
            sys.modules[name] = DeferredModule(spec)
            deferred.append(name)
    return deferred


def is_deferred(name: str) -> bool:
    """True while ``sys.modules[name]`` is a stand-in that has not imported its module."""
    module = sys.modules.get(name)
    return isinstance(module, DeferredModule) and "_real" not in module.__dict__


OTHER_TASKS_METRIC_MODULES = ("lmms_eval.tasks.amber_g.utils", "lmms_eval.tasks.coco_cap_chair.utils")
"""Modules lmms-eval's ``api.metrics.stderr_for_metric`` tries to import on every call, to add two
other tasks' aggregation functions to its list of bootstrappable metrics (importing them pulls in
nltk and more: ≈ 1.6 s at the end of every fast-path run). An EDCT task's aggregations are never
among them (nor named like them), so the answer of ``stderr_for_metric`` for our metrics does not
depend on them."""


@contextmanager
def imports_refused(names: tuple[str, ...] = OTHER_TASKS_METRIC_MODULES) -> Iterator[None]:
    """Inside the block, importing any of ``names`` that is not imported yet fails at once with
    ``ImportError`` (``None`` in ``sys.modules``: Python's "import halted"), which lmms-eval's
    optional imports catch; afterwards ``sys.modules`` is as before, so a later import works."""
    refused = []
    with _LOCK:
        for name in names:
            if name not in sys.modules:
                sys.modules[name] = None  # type: ignore[assignment]
                refused.append(name)
    try:
        yield
    finally:
        with _LOCK:
            for name in refused:
                if sys.modules.get(name, object()) is None:
                    del sys.modules[name]


USED_AT_THE_END = ("pytablewriter",)
"""Imported by the end of an ``edct run --model``, not before: lmms-eval's ``make_table`` (the
results table the CLI prints) imports pytablewriter on first use (≈ 0.1 s)."""


def import_in_background(modules: tuple[str, ...] = USED_AT_THE_END) -> threading.Thread:
    """Import ``modules`` on a daemon thread, for a run to call once it mostly waits on its backends:
    the import then costs nothing at the end, where everything is serial. A module that fails to
    import is left to fail where it is used."""

    def run() -> None:
        for name in modules:
            with suppress(Exception):  # reported where it is used, as it always was
                importlib.import_module(name)

    thread = threading.Thread(target=run, name="edct-import", daemon=True)
    thread.start()
    return thread
