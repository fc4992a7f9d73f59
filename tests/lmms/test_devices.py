"""A target that cannot start on this machine (a CUDA default without a CUDA device) fails once,
at start, in one line that names the fix, on both paths (``lmms_eval_target.cuda_problem``)."""

from __future__ import annotations

import pytest
import torch

from edct_task.lmms import plugin
from edct_task.lmms.documents import TaskLoadError
from model_adapters.errors import OptionsError
from model_adapters.lmms_eval_target import build_model, cuda_problem


class CudaByDefault:  # lmms-eval's qwen3_vl: device="cuda", device_map="auto"
    def __init__(
        self, pretrained: str = "x", device: str | None = "cuda", device_map: str | None = "auto"
    ) -> None:
        pass

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None) -> object:
        raise AssertionError("the model must not be built")


class DeviceOnly:
    def __init__(self, device: str = "cuda:0") -> None:
        pass


class NoDevice:  # an API model
    def __init__(self, model_version: str = "gpt") -> None:
        pass


@pytest.fixture()
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_a_cuda_default_without_cuda_names_the_fix(no_cuda):
    problem = cuda_problem(CudaByDefault, "qwen3_vl", "pretrained=p")
    assert problem == (
        "the lmms-eval model qwen3_vl would run on device=cuda (its default) and device_map=auto (its "
        "default), and this machine has no CUDA device: add device=cpu,device_map=cpu to --model_args "
        "(model_args) to run it on the CPU"
    )
    # device=cpu alone is not enough for a model that sends inputs to cuda when device_map is auto
    assert "device_map=auto (its default)" in cuda_problem(CudaByDefault, "m", "pretrained=p,device=cpu")
    assert cuda_problem(CudaByDefault, "m", "device=cpu,device_map=cpu") is None
    assert "device=cuda:1" in cuda_problem(DeviceOnly, "m", "", device="cuda:1")  # --device
    assert cuda_problem(DeviceOnly, "m", "", device="cpu") is None
    assert cuda_problem(NoDevice, "m", "") is None


def test_nothing_to_say_where_cuda_is_there(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert cuda_problem(CudaByDefault, "m", "") is None


def test_edct_run_refuses_it_before_building(no_cuda, monkeypatch):
    import lmms_eval.models

    monkeypatch.setattr(lmms_eval.models, "get_model", lambda name: CudaByDefault)
    with pytest.raises(OptionsError, match="add device=cpu,device_map=cpu"):
        build_model("qwen3_vl", "pretrained=p")


def test_lmms_evals_loop_refuses_it_before_lmms_eval_loads_it(no_cuda, monkeypatch, capsys):
    """The check reads lmms-eval's own ``simple_evaluate`` arguments (no re-parse of the command
    line): a command-line call (lmms-eval passes ``cli_args``) on an EDCT task stops before the
    model loads; another benchmark, or a call from Python, is left alone."""
    import argparse

    import lmms_eval.evaluator
    import lmms_eval.models

    monkeypatch.setattr(lmms_eval.models, "get_model", lambda name: CudaByDefault)
    ran = []
    monkeypatch.setattr(lmms_eval.evaluator, "simple_evaluate", lambda **kw: ran.append(kw["tasks"]))
    plugin.watch_evaluations()
    cli = argparse.Namespace(output_path=None)
    call = {"model": "qwen3_vl", "model_args": "pretrained=p", "device": None, "cli_args": cli}
    with pytest.raises(TaskLoadError) as stop:
        lmms_eval.evaluator.simple_evaluate(tasks=["edct_calibration"], **call)
    assert stop.value.code == 2 and ran == []
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("edct: the lmms-eval model qwen3_vl would run on device=cuda")
    lmms_eval.evaluator.simple_evaluate(tasks=["mme"], **call)
    lmms_eval.evaluator.simple_evaluate(tasks=["edct_calibration"], **{**call, "cli_args": None})
    assert ran == [["mme"], ["edct_calibration"]]
    # lmms-eval's --device is read from the call itself
    cpu = {**call, "model_args": "pretrained=p,device_map=cpu"}
    with pytest.raises(TaskLoadError, match="device=cuda"):
        lmms_eval.evaluator.simple_evaluate(tasks=["edct_calibration"], **cpu)
    lmms_eval.evaluator.simple_evaluate(tasks=["edct_calibration"], **{**cpu, "device": "cpu"})
    assert len(ran) == 3
