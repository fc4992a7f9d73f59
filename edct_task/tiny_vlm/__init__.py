"""A tiny Qwen3-VL trained on the calibration world: a real checkpoint with known faithfulness.

The calibration world's reference VLMs read pixels with OpenCV; the runtimes users run
(transformers through lmms-eval's ``qwen3_vl``, a vLLM server, lmms-eval's in-process ``vllm``)
need a real checkpoint to be checked against that oracle. This package builds one:

- ``architecture``: the small ``Qwen3VLForConditionalGeneration`` config (text head size 64, which
  vLLM's CPU attention supports), a byte-level BPE tokenizer trained on the world's text, the real
  Qwen3-VL processor, image processor and chat template;
- ``examples``: training conversations from freshly generated calibration scenes, answered and
  explained by the faithful reference VLM, in every shape the runtimes send;
- ``training``: the seeded training loop and the checkpoint it saves (``edct tiny-vlm train``);
- ``store``: the checkpoint cache that ``edct tiny-vlm path`` fills once (file lock);
- ``agreement``: first-turn agreement of a checkpoint with the reference on held-out scenes;
- ``comparison``: runs of one checkpoint through different runtimes, compared sample by sample;
- ``controls``: the negative control (re-queries answered about the original picture).

Part of the calibration instrument, not the product.
"""

BEHAVIORS: tuple[str, ...] = ("faithful", "prior")
"""``faithful``: trained on each scene's own image; ``prior``: on images of other scenes."""
