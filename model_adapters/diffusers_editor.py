"""Local image editing with diffusers: FLUX.1 Kontext, Qwen-Image-Edit (and Plus), FLUX.2 / Klein.

The pipeline is loaded once (``from_pretrained`` of a hub id or a local folder, with revision,
dtype and ``local_files_only``), placed on a device or CPU-offloaded, and called under a lock
(diffusers pipelines are not thread-safe). Each edit draws from a ``torch.Generator`` seeded with
the engine's seed, so an attempt is reproducible and the retry (another seed) differs. The output
is brought back to the input's size when the pipeline snapped it to its own grid (recorded in
``info["edct_resized_from"]``).

Options::

    pipeline: flux-kontext      # qwen-image-edit, qwen-image-edit-plus, flux2, flux2-klein, auto
    model: black-forest-labs/FLUX.1-Kontext-dev   # hub id or local folder
    revision: null
    device: auto                # cuda, cuda:1, mps, cpu; auto = cuda if available
    dtype: bfloat16             # float16, float32
    cpu_offload: none           # model (enable_model_cpu_offload) or sequential
    num_inference_steps: 28
    guidance_scale: null        # pipeline default when null (true_cfg_scale for Qwen: see call_kwargs)
    negative_prompt: null
    call_kwargs: {}             # any other keyword of the pipeline's __call__, e.g. {true_cfg_scale: 4.0}
    local_files_only: false
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any

from PIL import Image
from pydantic import Field

from model_adapters.errors import BadInput, OptionsError, PermanentBackendError, TransientBackendError
from model_adapters.remote_editor import EditorUsage, finish
from verification.backends import BackendOptions, check_options
from verification.localization import weights_identity

PIPELINES = {
    "flux-kontext": ("FluxKontextPipeline", {"num_inference_steps": 28, "guidance_scale": 2.5}),
    "qwen-image-edit": (
        "QwenImageEditPipeline",
        {"num_inference_steps": 50, "true_cfg_scale": 4.0, "negative_prompt": " "},
    ),
    "qwen-image-edit-plus": (
        "QwenImageEditPlusPipeline",
        {"num_inference_steps": 40, "true_cfg_scale": 4.0, "negative_prompt": " "},
    ),
    "flux2": ("Flux2Pipeline", {"num_inference_steps": 50, "guidance_scale": 4.0}),
    "flux2-klein": ("Flux2KleinPipeline", {"num_inference_steps": 4, "guidance_scale": 1.0}),
    "auto": ("DiffusionPipeline", {}),
}


class DiffusersOptions(BackendOptions):
    """``diffusers``: an image-editing pipeline run in-process."""

    pipeline: str = Field("flux-kontext", description=f"One of {', '.join(PIPELINES)}.")
    model: str | None = Field(None, description="Hub id or local folder of the pipeline (required).")
    revision: str | None = Field(None, description="Hub revision (recorded in the identity).")
    device: str = Field("auto", description="torch device; auto picks cuda when there is one.")
    dtype: str = Field("bfloat16", description="torch dtype of the weights.")
    cpu_offload: str | None = Field("none", description="none, model or sequential.")
    num_inference_steps: int | None = Field(None, description="Denoising steps (default per pipeline).")
    guidance_scale: float | None = Field(None, description="Guidance scale (default per pipeline).")
    negative_prompt: str | None = Field(None, description="Negative prompt (pipelines that take one).")
    call_kwargs: dict[str, Any] | None = Field(None, description="More arguments of the pipeline call.")
    local_files_only: bool = Field(False, description="Never download: the weights must be cached or local.")


_RESERVED = {"image", "prompt", "generator", "output_type", "return_dict", "num_images_per_prompt"}


class DiffusersEditor:
    """An ImageEditor running a diffusers image-editing pipeline in-process."""

    backend = "diffusers"

    def __init__(
        self,
        pipe: Any,
        *,
        pipeline: str,
        model: str,
        revision: str | None,
        dtype: str,
        call_kwargs: Mapping[str, Any],
        generator_device: str = "cpu",
    ) -> None:
        self.pipe = pipe
        self.pipeline = pipeline
        self.model = model
        self.revision = revision
        self.dtype = dtype
        self.call_kwargs = dict(call_kwargs)
        self.generator_device = generator_device
        self.name = f"diffusers:{pipeline}:{model}"
        self.stats = EditorUsage()
        self._lock = threading.Lock()

    def identity(self) -> dict[str, Any]:
        return weights_identity(
            self.backend,
            self.model,
            self.revision,
            pipeline=self.pipeline,
            dtype=self.dtype,
            call_kwargs=copy.deepcopy(self.call_kwargs),
            **{"class": type(self.pipe).__name__},
        )

    def usage(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, **self.stats.as_dict()}

    def edit(self, image: Image.Image, instruction: str, *, seed: int) -> Image.Image:
        import torch

        if image.width < 1 or image.height < 1:
            raise BadInput("empty image")
        if not instruction.strip():
            raise BadInput("empty instruction")
        kwargs = dict(self.call_kwargs)
        kwargs.setdefault("height", image.height)  # ask for the input's size; pipelines snap it to their grid
        kwargs.setdefault("width", image.width)
        with self._lock:
            generator = torch.Generator(device=self.generator_device).manual_seed(int(seed))
            try:
                out = self.pipe(
                    image=image.convert("RGB"),
                    prompt=instruction,
                    generator=generator,
                    output_type="pil",
                    **kwargs,
                )
            except torch.cuda.OutOfMemoryError as exc:
                self.stats.add("failures")
                raise TransientBackendError(f"{self.name}: out of GPU memory ({exc})"[:300]) from None
            except (RuntimeError, ValueError) as exc:
                self.stats.add("failures")
                raise PermanentBackendError(f"{self.name}: {type(exc).__name__}: {exc}"[:400]) from None
        images = getattr(out, "images", None)
        if not images:
            self.stats.add("failures")
            raise PermanentBackendError(f"{self.name}: the pipeline returned no image")
        edited = images[0]
        if not isinstance(edited, Image.Image):
            raise PermanentBackendError(
                f"{self.name}: the pipeline returned {type(edited).__name__}, not an image"
            )
        return finish(edited.convert("RGB"), image, self.stats)


def _dtype(name: str) -> Any:
    import torch

    table = {
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
        "float32": torch.float32,
        "fp32": torch.float32,
    }
    if name not in table:
        raise OptionsError(f"diffusers: dtype must be one of {', '.join(sorted(table))}")
    return table[name]


def _device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def from_options(options: Mapping[str, Any]) -> DiffusersEditor:
    check_options(DiffusersOptions, options, "backend 'diffusers'")
    try:
        import diffusers
    except ImportError:
        raise OptionsError(
            "backend 'diffusers' needs the diffusers package: pip install 'diffusers>=0.36'"
        ) from None
    pipeline = options.get("pipeline", "flux-kontext")
    if pipeline not in PIPELINES:
        raise OptionsError(f"diffusers: pipeline must be one of {', '.join(PIPELINES)}")
    class_name, defaults = PIPELINES[pipeline]
    cls = getattr(diffusers, class_name, None)
    if cls is None:
        raise OptionsError(f"diffusers {diffusers.__version__} has no {class_name}; upgrade diffusers")
    model = options.get("model")
    if not isinstance(model, str) or not model:
        raise OptionsError("diffusers: model must be a hub id or a local folder")
    dtype_name = str(options.get("dtype", "bfloat16"))
    dtype = _dtype(dtype_name)
    call_kwargs = {**defaults}
    for key in ("num_inference_steps", "guidance_scale", "negative_prompt"):
        if options.get(key) is not None:
            call_kwargs[key] = options[key]
    extra = options.get("call_kwargs") or {}
    if not isinstance(extra, Mapping) or _RESERVED & set(extra):
        raise OptionsError(f"diffusers: call_kwargs must be a mapping without {', '.join(sorted(_RESERVED))}")
    call_kwargs.update(extra)
    if class_name != "DiffusionPipeline":
        import inspect

        accepted = set(inspect.signature(cls.__call__).parameters)
        unknown = sorted(set(call_kwargs) - accepted)
        if unknown:
            raise OptionsError(f"diffusers: {class_name} does not take {', '.join(unknown)}")
    from diffusers.utils import deprecation_utils

    # diffusers renamed torch_dtype to dtype (the old name warns until 1.0)
    dtype_kw = "dtype" if hasattr(deprecation_utils, "_TORCH_DTYPE_DEPRECATION_MESSAGE") else "torch_dtype"
    try:
        pipe = cls.from_pretrained(
            model,
            revision=options.get("revision"),
            **{dtype_kw: dtype},
            local_files_only=bool(options.get("local_files_only", False)),
        )
    except OSError as exc:  # not cached while offline, gated, not found: what to do, in one line
        reason = " ".join(str(exc).split())[:300]
        raise OptionsError(
            f"diffusers: cannot load {model} ({type(exc).__name__}: {reason}); give a local folder, or a Hub "
            "id you can download (gated models: accept the licence on the Hub and set HF_TOKEN; offline: "
            "download it first)"
        ) from None
    offload = options.get("cpu_offload", "none")
    device = _device(str(options.get("device", "auto")))
    if offload == "model":
        pipe.enable_model_cpu_offload(device=device)
    elif offload == "sequential":
        pipe.enable_sequential_cpu_offload(device=device)
    elif offload in ("none", None, False):
        pipe.to(device)
    else:
        raise OptionsError("diffusers: cpu_offload must be none, model or sequential")
    if hasattr(pipe, "set_progress_bar_config"):
        pipe.set_progress_bar_config(disable=True)
    return DiffusersEditor(
        pipe,
        pipeline=pipeline,
        model=model,
        revision=options.get("revision"),
        dtype=dtype_name,
        call_kwargs=call_kwargs,
    )
