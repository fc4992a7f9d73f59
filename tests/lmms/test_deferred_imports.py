"""``defer_imports``: a module is imported on the first attribute read, once, and is then the real
module; the import machinery and ``inspect`` do not trigger it; a missing module stays missing."""

from __future__ import annotations

import importlib
import inspect
import sys

import pytest

from edct_task.lmms.deferred import DeferredModule, defer_imports, is_deferred


@pytest.fixture()
def package(tmp_path, monkeypatch):
    """A package ``edct_probe_pkg`` that counts how often its body and its submodule run."""
    root = tmp_path / "edct_probe_pkg"
    root.mkdir()
    (root / "__init__.py").write_text("import builtins\nbuiltins.EDCT_PROBE_RUNS += 1\nVALUE = 42\n")
    (root / "sub.py").write_text("NAME = 'sub'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("builtins.EDCT_PROBE_RUNS", 0, raising=False)
    yield "edct_probe_pkg"
    for name in ("edct_probe_pkg", "edct_probe_pkg.sub"):
        sys.modules.pop(name, None)


def _runs() -> int:
    import builtins

    return builtins.EDCT_PROBE_RUNS


def test_imported_on_first_attribute_read_only(package) -> None:
    assert defer_imports((package,)) == [package]
    import edct_probe_pkg  # binds the stand-in

    assert isinstance(edct_probe_pkg, DeferredModule) and is_deferred(package)
    inspect.getmodule(test_imported_on_first_attribute_read_only)  # reads __file__ of every module
    importlib.import_module(package)
    assert _runs() == 0
    assert edct_probe_pkg.VALUE == 42
    assert _runs() == 1 and not is_deferred(package)
    real = sys.modules[package]
    assert not isinstance(real, DeferredModule) and real.VALUE == 42
    assert edct_probe_pkg.VALUE == 42 and _runs() == 1  # the stand-in answers from the real one


def test_from_import_and_submodules_load_the_real_package(package) -> None:
    defer_imports((package,))
    from edct_probe_pkg import VALUE

    assert VALUE == 42
    defer_imports((package,))  # already imported: left alone
    assert importlib.import_module(f"{package}.sub").NAME == "sub"
    assert _runs() == 1


def test_a_submodule_import_first_loads_the_package_once(package) -> None:
    defer_imports((package,))
    assert importlib.import_module(f"{package}.sub").NAME == "sub"
    assert _runs() == 1 and not is_deferred(package)


def test_missing_modules_are_not_deferred() -> None:
    assert defer_imports(("edct_no_such_module_anywhere",)) == []
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("edct_no_such_module_anywhere")


def test_imports_refused_fails_fast_inside_and_leaves_the_import_working_after(package) -> None:
    from edct_task.lmms.deferred import imports_refused

    with imports_refused((package,)):
        with pytest.raises(ImportError):
            import edct_probe_pkg
        assert _runs() == 0  # refused before its body ran
    assert package not in sys.modules
    import edct_probe_pkg

    assert edct_probe_pkg.VALUE == 42 and _runs() == 1
    with imports_refused((package,)):  # an imported module is left alone
        assert importlib.import_module(package) is edct_probe_pkg


def test_lmms_eval_gives_our_metrics_the_same_stderr_without_other_tasks_modules() -> None:
    """``stderr_for_metric`` answers the EDCT tasks' aggregations the same when the two other
    tasks' metric modules it tries to import are refused (what the fast path does)."""
    from lmms_eval.api.metrics import mean, stderr_for_metric

    from edct_task.lmms import aggregation
    from edct_task.lmms.deferred import OTHER_TASKS_METRIC_MODULES, imports_refused

    ours = [mean, aggregation.count, aggregation.audit]  # what the EDCT task YAMLs aggregate with
    with imports_refused():
        refused = [stderr_for_metric(m, 1000) for m in ours]
        assert not any(sys.modules.get(n) for n in OTHER_TASKS_METRIC_MODULES)
    assert all(sys.modules.get(n, 0) is not None for n in OTHER_TASKS_METRIC_MODULES)
    assert refused == [stderr_for_metric(m, 1000) for m in ours]
