"""One record per domain: the registry, and a domain shipped outside the repository (the
``shapes`` domain of docs/extending.md, through the ``edct_bench.domains`` entry points) reaching
every output: ``edct build-bench``'s flags, help, ``--counts`` and ``--ids``, the dataset and its
manifest, ``edct run --tasks`` and its help, and an lmms-eval task whose ``process_docs`` hook
loads its documents."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from support.installed import TOY, dist_info, fresh_registries, install

from edct_task.bench_data import BenchDataError, load_bench, parse_counts, read_manifest
from edct_task.bench_data.domains import REGISTRY, registry
from edct_task.cli.main import build_parser, main
from edct_task.core.errors import ConfigError
from edct_task.lmms.tasks import GROUP, edct_tasks, task_data, task_folders, task_yaml

TABLE = TOY / "shapes.csv"


def _help(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser()[0].parse_args([*argv, "--help"])
    return " ".join(out.getvalue().split())


def test_the_shipped_task_yamls_are_their_records_rendering() -> None:
    from task_configs import TASK_DIR

    for domain in REGISTRY.values():
        assert (TASK_DIR / f"{domain.task}.yaml").read_text("utf-8") == task_yaml(domain)
    group = (TASK_DIR / "edct_bench.yaml").read_text("utf-8")
    listed = group.split("task:\n", 1)[1].split("aggregate_metric_list", 1)[0].split()
    assert [t for t in listed if t != "-"] == [d.task for d in REGISTRY.values()]
    assert task_folders() == [str(TASK_DIR)]  # no domain without a shipped YAML: no extra folder


def test_counts_are_one_per_domain_or_named() -> None:
    assert parse_counts("160,80,60") == {"okvqa": 160, "drivelm": 80, "3dsr": 60}
    assert parse_counts("3dsr=5") == {"okvqa": 160, "drivelm": 80, "3dsr": 5}
    for bad, message in (
        ("1,2", r"expected 3 integers, one per domain \(okvqa,drivelm,3dsr\)"),
        ("okvqa=1,2", "one integer per domain"),
        ("toy=1", "no domain toy"),
        ("okvqa=x", "okvqa: 'x' is not an integer"),
        ("okvqa=-1", "a count is >= 0"),
    ):
        with pytest.raises(BenchDataError, match=message):
            parse_counts(bad)


def test_a_domain_shipped_outside_the_repo_reaches_every_output(tmp_path, monkeypatch, capsys) -> None:
    install(tmp_path / "site", monkeypatch)
    assert list(registry()) == ["okvqa", "drivelm", "3dsr", "shapes"]
    # edct build-bench: its flag, its group and its default count in the help
    text = _help("build-bench")
    assert "Shapes (domain shapes): toy questions about one coloured shape" in text
    assert "--shapes-table FILE shapes.csv: id, shape, colour, question, answer" in text
    assert "okvqa,drivelm,3dsr,shapes (default 160,80,60,4)" in text
    assert "60 3DSRBench, 4 Shapes items" in text
    # and the build: its reader, its rule, its system prompt, in the dataset and the manifest
    out = tmp_path / "bench"
    assert (
        main(["build-bench", "--shapes-table", str(TABLE), "--counts", "shapes=4", "--output", str(out)]) == 0
    )
    assert (
        "shapes      4 selected of 4 eligible (5 read; removed: shapes.known_shape=1)"
        in capsys.readouterr().out
    )
    ds = load_bench(out)
    assert sorted(ds["id"]) == ["shapes-1", "shapes-2", "shapes-3", "shapes-4"]
    assert set(ds["domain"]) == {"shapes"} and set(ds["source"]) == {"Shapes"}
    assert set(ds["system_prompt"]) == {"You are looking at a drawing of one shape."}
    assert ds[0]["image"].size == (96, 96)
    manifest = read_manifest(out)
    assert manifest["counts"] == {"shapes": 4}
    assert manifest["system_prompts"]["shapes"] == "You are looking at a drawing of one shape."
    # --counts by position takes one count per registered domain, the new one included
    assert (
        main(
            [
                "build-bench",
                "--shapes-table",
                str(TABLE),
                "--counts",
                "0,0,0,2",
                "--output",
                str(tmp_path / "b2"),
            ]
        )
        == 0
    )
    assert len(load_bench(tmp_path / "b2")) == 2
    assert (
        main(
            [
                "build-bench",
                "--shapes-table",
                str(TABLE),
                "--counts",
                "160,80,60",
                "--output",
                str(tmp_path / "b3"),
            ]
        )
        == 2
    )
    assert "expected 4 integers, one per domain (okvqa,drivelm,3dsr,shapes)" in capsys.readouterr().err
    # --ids knows its prefix, and names the rule that removed an id
    ids = tmp_path / "ids.txt"
    ids.write_text("shapes-3\nshapes-1\n")
    assert (
        main(
            ["build-bench", "--shapes-table", str(TABLE), "--ids", str(ids), "--output", str(tmp_path / "b4")]
        )
        == 0
    )
    assert load_bench(tmp_path / "b4")["id"] == ["shapes-3", "shapes-1"]
    ids.write_text("shapes-5\n")
    assert (
        main(
            ["build-bench", "--shapes-table", str(TABLE), "--ids", str(ids), "--output", str(tmp_path / "b5")]
        )
        == 2
    )
    assert "id 'shapes-5' was removed by rule shapes.known_shape" in capsys.readouterr().err
    # its input is checked by the record: a missing file is one line naming the flag
    assert (
        main(["build-bench", "--shapes-table", str(tmp_path / "nope.csv"), "--output", str(tmp_path / "b6")])
        == 2
    )
    assert "nope.csv: file not found (--shapes-table: shapes.csv" in capsys.readouterr().err

    # edct run --tasks: accepted, in the help, and it stands for the domain's items
    assert "edct_bench_shapes" in edct_tasks()
    assert task_data("edct_bench_shapes") == {"source": "dataset", "domains": ["shapes"]}
    assert task_data(f"{GROUP}") == {"source": "dataset"}
    assert "edct_bench_3dsr, edct_bench_shapes, edct_calibration" in _help("run")

    # lmms-eval: the task exists (its YAML written beside task_configs/), and its process_docs
    # hook loads the domain's documents from $EDCT_BENCH_DATA
    import datasets
    from lmms_eval.tasks import TaskManager
    from support.loopback import served_roles_config

    from edct_task.lmms import documents

    folders = task_folders()
    assert len(folders) == 2 and (Path(folders[1]) / "edct_bench_shapes.yaml").is_file()
    manager = TaskManager("WARNING", include_path=folders, include_defaults=False)
    assert {"edct_bench_shapes", "edct_bench_okvqa", GROUP} <= set(manager.all_tasks)
    config = manager._get_config("edct_bench_shapes")
    assert config["process_docs"].__name__ == "docs_shapes"
    assert config["output_type"] == "generate_until_agentic"  # the shared template is included
    monkeypatch.setenv("EDCT_BENCH_DATA", str(out))
    monkeypatch.setenv("EDCT_LOOPBACK_KEY", "sk-unused")  # real photos need real roles; none is called
    roles = served_roles_config(tmp_path / "roles.yaml", "http://127.0.0.1:9", "EDCT_LOOPBACK_KEY")
    monkeypatch.setenv("EDCT_CONFIG", str(roles))
    monkeypatch.setenv("EDCT_WORK_DIR", str(tmp_path / "work"))
    stub = datasets.Dataset.from_list([{documents.STUB_COLUMN: "x"}])
    try:
        docs = config["process_docs"](stub)
        assert sorted(docs["id"]) == ["shapes-1", "shapes-2", "shapes-3", "shapes-4"]
        assert (
            documents.sample_of(docs[0], "ref").system_prompt == "You are looking at a drawing of one shape."
        )
    finally:
        from edct_task.lmms import settings

        settings.release()
    with pytest.raises(AttributeError):
        documents.docs_nothing  # noqa: B018  (no such domain: no hook)


def test_a_bad_domain_entry_point_is_one_line(tmp_path, monkeypatch, capsys) -> None:
    package = tmp_path / "broken"
    package.mkdir()
    (package / "pyproject.toml").write_text(
        '[project.entry-points."edct_bench.domains"]\nbroken = "no_such_mod:DOMAIN"\n'
    )
    monkeypatch.syspath_prepend(str(dist_info(tmp_path / "site", package, "broken")))
    fresh_registries(monkeypatch)
    with pytest.raises(ConfigError) as caught:
        registry()
    assert "entry point broken = no_such_mod:DOMAIN (group edct_bench.domains)" in str(caught.value)
    assert "\n" not in str(caught.value)
    fresh_registries(monkeypatch)
    assert main(["build-bench", "--help"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("edct: ") and len(err.strip().splitlines()) == 1 and "ModuleNotFoundError" in err


def test_the_record_refuses_what_it_cannot_be(tmp_path) -> None:
    from edct_task.bench_data import Domain, HubSource, Input

    with pytest.raises(ValueError, match="a name is lower-case letters"):
        Domain("My-Domain", "X", 1, (), lambda paths: None)  # type: ignore[arg-type,return-value]
    okvqa = REGISTRY["okvqa"]
    with pytest.raises(BenchDataError, match=r"okvqa takes no input\(s\) colour"):
        okvqa.scan_local({"colour": tmp_path})
    with pytest.raises(BenchDataError, match="--okvqa-questions is required"):
        okvqa.scan_local({})
    with pytest.raises(BenchDataError, match=r"--okvqa-hub takes no option\(s\) config"):
        okvqa.scan_hub(HubSource(str(tmp_path), options={"config": "x"}))
    with pytest.raises(BenchDataError, match="--x-a is required: what it is"):
        Input("a", "--x-a", "what it is").check(None)
    assert Input("a", "--x-a", "what it is", required=False).check(None) is None
