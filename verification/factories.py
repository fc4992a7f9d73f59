"""Detector and segmenter backends of this package: their factories and registration records.

Each factory takes the role's options mapping from the run config and imports its optional
dependencies inside itself. A ``detector`` role names a detector backend and, optionally, a
nested ``segmenter``; the factory returns ``DetectAndSegment(detector, segmenter)``::

    detector: {backend: owlv2, model: google/owlv2-base-patch16-ensemble, threshold: 0.1,
               segmenter: {backend: sam2, model: facebook/sam2.1-hiera-large}}
    detector: {backend: grounding-dino, model: IDEA-Research/grounding-dino-base,
               threshold: 0.3, text_threshold: 0.25, segmenter: {backend: sam2, model: /models/sam2}}
    detector: {backend: opencv-cascade}                    # faces etc.; GrabCut masks by default

Default segmenter: ``grabcut`` for ``opencv-cascade`` (a face box holds much background),
``box`` for the open-vocabulary detectors (no weights needed; configure ``sam2`` for real
masks). ``segmenter`` may also be a bare name (``segmenter: grabcut``).

A detector of another package (Moondream's HTTP API in ``model_adapters``) is built there with
``detector_factory`` and registered there: a new detector touches its own folder only. ``RECORDS``
lists this package's backends (``verification.backends.BackendRecord``); the composition root
(``edct_task.roles``) collects every package's ``RECORDS``. Invalid options raise
``OptionsError`` (a ``ValueError``) naming the option.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import Field, field_validator

from verification.backends import BackendOptions, BackendRecord, Latency, OptionsError, check_options

Factory = Callable[[Mapping[str, Any]], Any]

__all__ = [
    "DETECTOR_OPTIONS",
    "RECORDS",
    "SEGMENTER_OPTIONS",
    "DetectorOptions",
    "OptionsError",
    "build_detector",
    "build_segmenter",
    "detector_factory",
]


# -- segmenters ------------------------------------------------------------------------------------
class BoxOptions(BackendOptions):
    """``box``: the detection boxes themselves as the mask (no weights, no options)."""


class GrabCutOptions(BackendOptions):
    """``grabcut``: OpenCV GrabCut inside each box."""

    iterations: int = Field(5, description="GrabCut iterations (>= 1).")
    context: float = Field(0.5, description="Margin around the box, as a fraction of its size.")
    max_side: int = Field(384, description="Longest side the crop is scaled to (>= 32).")
    min_fill: float = Field(0.05, description="Below this share of the box, the box itself is the mask.")


class Sam2Options(BackendOptions):
    """``sam2``: SAM 2 prompted with each box (transformers)."""

    model: str | None = Field(
        None, description="Hugging Face id or local folder of a SAM 2 checkpoint (required)."
    )
    device: str = Field("cpu", description="torch device.")
    mask_threshold: float = Field(0.0, description="Logit threshold of the mask.")
    multimask_output: bool = Field(True, description="Let SAM 2 propose several masks and keep the best.")
    revision: str | None = Field(None, description="Hub revision (recorded in the identity).")
    dtype: str | None = Field(None, description="torch dtype, e.g. float16.")


def _segmenter_spec(spec: object) -> tuple[str, dict[str, Any]]:
    """``(backend, options)`` of ``segmenter:`` (a name, or a mapping with ``backend`` and options),
    the options checked by the backend's model."""
    if isinstance(spec, str):
        spec = {"backend": spec}
    if not isinstance(spec, Mapping):
        raise OptionsError(f"segmenter must be a name or a mapping with 'backend', got {type(spec).__name__}")
    options = dict(spec)
    backend = options.pop("backend", None)
    if backend not in SEGMENTER_OPTIONS:
        raise OptionsError(f"unknown segmenter backend {backend!r}; known: {', '.join(SEGMENTER_OPTIONS)}")
    check_options(SEGMENTER_OPTIONS[backend], options, f"segmenter {backend!r}")
    return backend, options


def _check_segmenter(spec: object) -> object:
    """``segmenter:`` checked by its backend's options (``_segmenter_spec``); None is the default."""
    if spec is not None:
        _segmenter_spec(spec)
    return spec


# -- detectors -------------------------------------------------------------------------------------
class DetectorOptions(BackendOptions):
    """What every detector takes: its nested segmenter."""

    segmenter: str | dict[str, Any] | None = Field(
        None, description="The segmenter: a name (box, grabcut, sam2) or {backend: …, options…}."
    )

    @field_validator("segmenter", mode="before")
    @classmethod
    def _segmenter_known(cls, value: Any) -> Any:
        try:
            return _check_segmenter(value)
        except OptionsError as exc:
            raise ValueError(str(exc)) from None


class CascadeOptions(DetectorOptions):
    """``opencv-cascade``: Haar/LBP cascades (faces, eyes, …); GrabCut masks by default."""

    engine: str = Field("auto", description="auto, opencv or skimage.")
    cascade_dir: str | None = Field(None, description="Folder of extra cascade XML files.")
    scale_factor: float = Field(1.1, description="Image pyramid step (> 1).")
    min_neighbors: int = Field(10, description="Neighbours a detection needs to be kept.")
    min_size_fraction: float = Field(
        0.06, description="Smallest box, as a fraction of the image's short side."
    )
    max_side: int = Field(640, description="Longest side the image is scaled to before detection.")
    max_boxes: int = Field(10, description="Boxes kept at most.")


class ZeroShotOptions(DetectorOptions):
    """``owlv2``: open-vocabulary detection with OWLv2 (transformers)."""

    model: str | None = Field(None, description="Hugging Face id or local folder (required).")
    device: str = Field("cpu", description="torch device.")
    threshold: float | None = Field(None, description="Box score threshold; default per family.")
    max_boxes: int = Field(10, description="Boxes kept at most.")
    query_template: str | None = Field(
        None, description="Text query around the target, e.g. 'a photo of {}'."
    )
    revision: str | None = Field(None, description="Hub revision (recorded in the identity).")


class GroundingDinoOptions(ZeroShotOptions):
    """``grounding-dino``: open-vocabulary detection with Grounding DINO (transformers)."""

    text_threshold: float = Field(0.25, description="Text-token score threshold.")


SEGMENTER_OPTIONS: dict[str, type[BackendOptions]] = {
    "box": BoxOptions,
    "grabcut": GrabCutOptions,
    "sam2": Sam2Options,
}
DETECTOR_OPTIONS: dict[str, type[DetectorOptions]] = {
    "opencv-cascade": CascadeOptions,
    "owlv2": ZeroShotOptions,
    "grounding-dino": GroundingDinoOptions,
}
DEFAULT_SEGMENTER = {"opencv-cascade": "grabcut", "owlv2": "box", "grounding-dino": "box"}


def _build(what: str, fn: Callable[[], Any]) -> Any:
    """Run a constructor, turning its complaints into ``OptionsError`` naming the backend."""
    try:
        return fn()
    except OptionsError:
        raise
    except ImportError as exc:
        raise OptionsError(
            f"{what} needs a package that is not installed ({exc}); "
            "pip install 'transformers>=4.56' torch for the transformers backends"
        ) from None
    except (ValueError, TypeError, OSError) as exc:
        raise OptionsError(f"{what}: {exc}") from None


def _model(options: Mapping[str, Any], what: str) -> str:
    model = options.get("model")
    if not isinstance(model, str) or not model:
        raise OptionsError(f"{what} needs model: a Hugging Face id or a local folder")
    return model


def build_segmenter(spec: str | Mapping[str, Any] | None, *, default: str = "box") -> Any:
    """A segmenter from ``segmenter:`` (a name, or a mapping with ``backend`` and options)."""
    backend, options = _segmenter_spec(default if spec is None else spec)
    what = f"segmenter {backend!r}"
    if backend == "box":
        from verification.segmentation import BoxSegmenter

        return BoxSegmenter()
    if backend == "grabcut":
        from verification.segmentation import GrabCutSegmenter

        return _build(what, lambda: GrabCutSegmenter(**options))
    model = _model(options, what)
    rest = {k: v for k, v in options.items() if k != "model"}

    def sam2() -> Any:
        from verification.sam2_segmenter import Sam2Segmenter

        return Sam2Segmenter(model, **rest)

    return _build(what, sam2)


def build_detector(backend: str, options: Mapping[str, Any]) -> Any:
    """A bare ``Detector`` (no segmenter) from a backend name and its options."""
    if backend not in DETECTOR_OPTIONS:
        raise OptionsError(f"unknown detector backend {backend!r}; known: {', '.join(DETECTOR_OPTIONS)}")
    what = f"detector {backend!r}"
    check_options(DETECTOR_OPTIONS[backend], options, what)
    if backend == "opencv-cascade":
        from verification.cascade_detector import CascadeDetector

        return _build(what, lambda: CascadeDetector(**options))
    model = _model(options, what)
    rest = {k: v for k, v in options.items() if k != "model"}

    def zero_shot() -> Any:
        from verification.zero_shot_detector import ZeroShotDetector

        return ZeroShotDetector(model, family=backend, **rest)

    return _build(what, zero_shot)


def detector_factory(
    name: str,
    options: type[DetectorOptions],
    build: Callable[[Mapping[str, Any]], Any],
    *,
    segmenter: str = "box",
) -> Factory:
    """The role factory of a detector: checks ``options`` (``segmenter`` included), builds the bare
    detector with ``build`` and pairs it with its segmenter (default ``segmenter``)."""

    def factory(spec: Mapping[str, Any]) -> Any:
        from verification.detect_and_segment import DetectAndSegment

        check_options(options, spec, f"detector {name!r}")
        opts = dict(spec)
        seg = build_segmenter(opts.pop("segmenter", None), default=segmenter)
        return DetectAndSegment(_build(f"detector {name!r}", lambda: build(opts)), seg)

    factory.__name__ = f"detector_{name.replace('-', '_')}"
    return factory


def _detector(name: str) -> Factory:
    return detector_factory(
        name, DETECTOR_OPTIONS[name], lambda o: build_detector(name, o), segmenter=DEFAULT_SEGMENTER[name]
    )


_DETECTION = Latency(2.0, sd=0.5, note="detector + segmenter, 2 s per edit")
RECORDS = (
    BackendRecord("detector", "opencv-cascade", _detector("opencv-cascade"), CascadeOptions, _DETECTION),
    BackendRecord(
        "detector", "owlv2", _detector("owlv2"), ZeroShotOptions, _DETECTION, local_weights=True, serial=True
    ),
    BackendRecord(
        "detector",
        "grounding-dino",
        _detector("grounding-dino"),
        GroundingDinoOptions,
        _DETECTION,
        local_weights=True,
        serial=True,
    ),
    BackendRecord(
        "segmenter", "box", lambda o: build_segmenter({"backend": "box", **o}), BoxOptions, Latency(0.0)
    ),
    BackendRecord(
        "segmenter",
        "grabcut",
        lambda o: build_segmenter({"backend": "grabcut", **o}),
        GrabCutOptions,
        Latency(0.0),
    ),
    BackendRecord(
        "segmenter",
        "sam2",
        lambda o: build_segmenter({"backend": "sam2", **o}),
        Sam2Options,
        Latency(0.0),
        local_weights=True,
    ),
)
"""This package's backends (``verification.backends``); ``edct_task.roles`` collects them."""
