"""Architecture shapes served with random weights: a model directory with a config.json and no weights, for timing.

``shape:<name>`` as ``--model`` serves a named architecture at its published sizes (:data:`SHAPES`) with the
packaged default model's tokenizer, through vLLM's ``--load-format dummy`` (random weights; vLLM seeds them, so two
engines of one release write the same tokens). Speed at the size users serve becomes measurable on any machine
without weights; answers, right answers and ngram's acceptance mean nothing, and the report says so.
Rules and measurements: docs/method.md#release-timing-at-serving-size.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from specharness._errors import ModelError

__all__ = ["SHAPES", "SHAPE_PREFIX", "write_shape"]

SHAPE_PREFIX = "shape:"

# name -> the architecture's published sizes (its config.json on release), applied over the default model's config
# (tokenizer ids, vocabulary, dtype); each entry says where its sizes come from
SHAPES: dict[str, dict[str, Any]] = {
    # Llama 3.1 8B (Meta, July 2024): 32 layers of width 4096, MLP 14336, 32 query heads over 8 KV heads
    "llama-8b": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
    },
    # SmolLM2 135M's own sizes, with random weights: the shape path on a CPU at the default model's cost
    "smollm2-135m": {
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "head_dim": 64,
        "rope_theta": 100000.0,
        "tie_word_embeddings": True,
    },
}
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")


def shape_config(name: str, base: dict[str, Any]) -> dict[str, Any]:
    """The config.json of shape ``name``: the base model's config (tokenizer ids, vocabulary) with the shape's
    sizes; a rope theta goes wherever the base keeps it (``rope_parameters`` in transformers 5, else top level)."""
    if name not in SHAPES:
        raise ModelError(f"--model {SHAPE_PREFIX}{name}: unknown shape; use one of {', '.join(SHAPES)}")
    sizes = dict(SHAPES[name])
    theta = sizes.pop("rope_theta")
    config = {k: v for k, v in base.items() if not k.startswith("_")}
    config.update(sizes)
    if isinstance(config.get("rope_parameters"), dict):
        config["rope_parameters"] = {**config["rope_parameters"], "rope_theta": theta}
    else:
        config["rope_theta"] = theta
    config["architectures"], config["model_type"] = ["LlamaForCausalLM"], "llama"
    return config


def write_shape(name: str, tokenizer_dir: Path, out_dir: Path) -> None:
    """Write shape ``name``'s model directory (config.json and the tokenizer files of ``tokenizer_dir``, no weights)
    into ``out_dir`` atomically."""
    base = json.loads((tokenizer_dir / "config.json").read_text())
    config = shape_config(name, base)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=out_dir.name + ".", dir=out_dir.parent))
    try:
        (staging / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        for file in _TOKENIZER_FILES:
            if (tokenizer_dir / file).is_file():
                shutil.copy2(tokenizer_dir / file, staging / file)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ModelError(f"--model {SHAPE_PREFIX}{name}: could not write {out_dir}: {exc}") from None
