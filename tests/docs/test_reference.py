"""The generated reference (docs/hooks/reference.py): complete, and built from the real code.

Every ``edct`` flag needs a ``help`` and every field of the documented pydantic models (the run
config, the records, the run log) a ``description``: the site's reference is generated from them.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

ROOT = Path(__file__).resolve().parents[2]


def _hook():
    spec = importlib.util.spec_from_file_location(
        "edct_docs_reference", ROOT / "docs" / "hooks" / "reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


reference = _hook()


def test_every_cli_argument_has_help() -> None:
    missing = reference.unhelped_arguments(reference.commands())
    assert missing == [], "arguments without help= (the CLI reference is generated from it): " + ", ".join(
        missing
    )


def test_every_documented_model_field_has_a_description() -> None:
    models = reference.documented_models()
    names = {m.__name__ for m in models}
    # the models a user meets: the run config, every record of samples.jsonl, the run log
    assert {"RunConfig", "DataSection", "ProtocolConfig", "Limits", "GateParams", "SampleRecord"} <= names
    assert {"ChainStep", "EditCheck", "BinaryScore", "RunLog", "Label"} <= names
    missing = reference.undescribed_fields(models)
    assert missing == [], "fields without a description: " + ", ".join(missing)


def test_the_checks_catch_a_bare_field_and_a_bare_flag() -> None:
    class Undocumented(BaseModel):
        documented: int = Field(1, description="has one")
        bare: int = 2

    assert reference.undescribed_fields([Undocumented]) == [f"{__name__}.Undocumented.bare"]
    parser = argparse.ArgumentParser(prog="edct x")
    parser.add_argument("--told", help="has one")
    parser.add_argument("--bare")
    found = list(reference._walk(parser, ("edct", "x")))
    assert reference.unhelped_arguments(found) == ["edct x --bare"]


def test_every_model_a_page_nests_is_documented_and_described() -> None:
    for group in reference.MODEL_GROUPS:
        for model in reference.group_models(group):
            assert model in reference.documented_models(), (
                f"{group} nests {model.__name__}, outside MODEL_MODULES"
            )


def test_the_cli_page_lists_every_command_and_flag() -> None:
    from edct_task.cli.main import build_parser

    page = reference.cli_markdown()
    parser, owners = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in owners:
        assert f"## `edct {name}`" in page
    for flag in ("--fail-on-unscored", "--model_args", "--latencies-from", "--with-images", "--annotator"):
        assert f"`{flag}`" in page
    assert "`edct tiny-vlm train`" in page  # a sub-command's sub-command
    assert len(sub.choices) >= len(owners)


def test_model_page_rows_show_type_default_and_description() -> None:
    page = reference.models_markdown("config")
    assert "### RunConfig" in page and "### ProtocolConfig" in page and "### GateParams" in page
    row = next(line for line in page.splitlines() if line.startswith("| `tau_in` |"))
    assert "<code>float</code>" in row and "`0.1`" in row and r"r\_in &gt; tau\_in" in row
    k = next(line for line in page.splitlines() if line.startswith("| `k` |"))
    assert "`2`" in k
    records = reference.models_markdown("records")
    assert "### SampleRecord" in records and "### EditAttempt" in records and "### AlignmentReport" in records


def test_the_hook_replaces_every_marker_and_refuses_an_unknown_group() -> None:
    page = "# x\n\n<!-- edct-reference: models run-log -->\n\n<!-- edct-reference: cli -->\n"
    out = reference.on_page_markdown(page)
    assert "edct-reference" not in out and "### RunLog" in out and "## `edct run`" in out
    with pytest.raises(ValueError, match="unknown model group"):
        reference.on_page_markdown("<!-- edct-reference: models nonsense -->")


def test_the_backends_page_lists_every_backend_its_traits_and_options() -> None:
    from edct_task.roles import registry

    page = reference.backends_markdown()
    for kind, records in registry().items():
        assert f"### {kind}\n" in page
        for name, record in records.items():
            assert f"#### `{name}`" in page
            for option in record.options_model().model_fields:
                assert f"| `{option}` |" in page
    assert "Traits: `paid`" in page and "`max_cost_usd`" in page and "`price_per_call_usd`" in page
    assert "<!-- edct-reference: backends -->" in (ROOT / "docs" / "reference" / "config.md").read_text()


def test_no_default_shows_as_raw_backticks() -> None:
    """An empty default (``--model_args ""``) was written as an empty code span, which Markdown
    shows as two raw backticks; a backtick inside a default needs a longer fence."""
    page = reference.cli_markdown() + reference.models_markdown("config")
    assert not [line for line in page.splitlines() if "``" in line.replace("```", "") and "| ``" in line]
    row = next(line for line in reference.cli_markdown().splitlines() if line.startswith("| `--model_args`"))
    assert '`""`' in row
    assert reference.code("") == '`""`'
    assert reference.code("a`b") == "``a`b``"
    assert reference.code("`x`") == "`` `x` ``"
    assert reference.code(0.1) == "`0.1`"
