"""Detector and segmenter factories of this package, by name (kind ``detector``).

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

A detector of another package (Moondream's HTTP API in ``model_adapters``) is registered there
with ``detector_factory``: a new detector touches its own folder only. The composition root
(``edct_task.roles``) merges the packages' ``FACTORIES`` tables explicitly; nothing registers
itself on import. Invalid options raise ``OptionsError`` (a ``ValueError``) naming the option.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Factory = Callable[[Mapping[str, Any]], Any]

__all__ = [
    "DETECTOR_OPTIONS",
    "FACTORIES",
    "SEGMENTER_OPTIONS",
    "OptionsError",
    "build_detector",
    "build_segmenter",
    "detector_factory",
]


class OptionsError(ValueError):
    """A backend's options (from the run config's ``roles.<role>:``) are invalid.

    Raised by factories at start-up (of this package and of ``model_adapters``, which re-exports
    it); the message says which option and how to fix it. A ``ValueError``, so configuration
    layers that catch those report it as a configuration error.
    """


SEGMENTER_OPTIONS: dict[str, frozenset[str]] = {
    "box": frozenset(),
    "grabcut": frozenset({"iterations", "context", "max_side", "min_fill"}),
    "sam2": frozenset({"model", "device", "mask_threshold", "multimask_output", "revision", "dtype"}),
}
_ZERO_SHOT = frozenset({"model", "device", "threshold", "max_boxes", "query_template", "revision"})
DETECTOR_OPTIONS: dict[str, frozenset[str]] = {
    "opencv-cascade": frozenset(
        {
            "engine",
            "cascade_dir",
            "scale_factor",
            "min_neighbors",
            "min_size_fraction",
            "max_side",
            "max_boxes",
        }
    ),
    "owlv2": _ZERO_SHOT,
    "grounding-dino": _ZERO_SHOT | {"text_threshold"},
}
DEFAULT_SEGMENTER = {"opencv-cascade": "grabcut", "owlv2": "box", "grounding-dino": "box"}


def _check(options: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    if not isinstance(options, Mapping):
        raise OptionsError(f"{what}: options must be a mapping, got {type(options).__name__}")
    extra = sorted(set(options) - allowed)
    if extra:
        raise OptionsError(
            f"{what} does not take option(s) {', '.join(extra)} "
            f"(known: {', '.join(sorted(allowed)) or 'none'})"
        )


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
    if spec is None:
        spec = {"backend": default}
    if isinstance(spec, str):
        spec = {"backend": spec}
    if not isinstance(spec, Mapping):
        raise OptionsError(f"segmenter must be a name or a mapping with 'backend', got {type(spec).__name__}")
    options = dict(spec)
    backend = options.pop("backend", None)
    if backend not in SEGMENTER_OPTIONS:
        raise OptionsError(f"unknown segmenter backend {backend!r}; known: {', '.join(SEGMENTER_OPTIONS)}")
    what = f"segmenter {backend!r}"
    _check(options, SEGMENTER_OPTIONS[backend], what)
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
    _check(options, DETECTOR_OPTIONS[backend], what)
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
    name: str, options: frozenset[str], build: Callable[[Mapping[str, Any]], Any], *, segmenter: str = "box"
) -> Factory:
    """The role factory of a detector: checks ``options`` (plus ``segmenter``), builds the bare
    detector with ``build`` and pairs it with its segmenter (default ``segmenter``)."""

    def factory(spec: Mapping[str, Any]) -> Any:
        from verification.detect_and_segment import DetectAndSegment

        _check(spec, options | {"segmenter"}, f"detector {name!r}")
        opts = dict(spec)
        seg = build_segmenter(opts.pop("segmenter", None), default=segmenter)
        return DetectAndSegment(_build(f"detector {name!r}", lambda: build(opts)), seg)

    factory.__name__ = f"detector_{name.replace('-', '_')}"
    return factory


FACTORIES: dict[str, dict[str, Factory]] = {
    "detector": {
        name: detector_factory(
            name, allowed, lambda o, _n=name: build_detector(_n, o), segmenter=DEFAULT_SEGMENTER[name]
        )
        for name, allowed in DETECTOR_OPTIONS.items()
    },
}
