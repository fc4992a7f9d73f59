"""Which EDCT roles Inspect's ``--model-role`` binds (``role_model.bind_model_roles``), without a run:
the text roles named, a list of models as a judge panel, the rest from the EDCT config."""

from __future__ import annotations

import pytest
from support.inspect_extra import require_inspect

require_inspect()

from inspect_ai.model import get_model  # noqa: E402
from inspect_ai.model._model import init_model_roles  # noqa: E402

from edct_task.config import calibration_config  # noqa: E402
from edct_task.inspect.role_model import bind_model_roles  # noqa: E402


@pytest.fixture(autouse=True)
def no_roles():
    yield
    init_model_roles({})


def test_without_model_roles_the_config_is_unchanged() -> None:
    init_model_roles({})
    config = calibration_config()
    assert bind_model_roles(config) is config


def test_a_bound_judge_list_is_a_panel_and_other_roles_stay() -> None:
    init_model_roles(
        {"judge": [get_model("edct/rules"), get_model("edct/faithful")], "grader": get_model("edct/rules")}
    )
    config = bind_model_roles(calibration_config())
    assert config.role_specs()["judge"].as_dict() == [
        {"backend": "inspect-role", "role": "judge", "member": 0, "model": "edct/rules"},
        {"backend": "inspect-role", "role": "judge", "member": 1, "model": "edct/faithful"},
    ]
    assert config.protocol.judges == 2
    assert config.role_specs()["extractor"].as_dict() == {"backend": "calibration-rules"}
    assert "grader" not in config.roles  # not an EDCT role: Inspect's business


def test_a_bound_edit_parser_is_used_even_where_the_config_had_none() -> None:
    base = calibration_config()
    without = base.model_validate({**base.model_dump(mode="json"), "roles": {
        r: s for r, s in base.model_dump(mode="json")["roles"].items() if r != "edit_parser"
    }})  # fmt: skip
    assert not without.protocol.llm_edit_parser
    init_model_roles({"edit_parser": get_model("edct/rules")})
    config = bind_model_roles(without)
    assert config.protocol.llm_edit_parser
    assert config.role_specs()["edit_parser"].as_dict()["model"] == "edct/rules"
