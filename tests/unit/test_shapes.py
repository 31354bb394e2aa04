"""Architecture shapes served with random weights (engines/shapes.py): the config written from published sizes over
the packaged tokenizer, the engine flag, and the report's note."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specharness._errors import ModelError
from specharness.engines.model import resolve_model
from specharness.engines.shapes import SHAPES, shape_config
from specharness.experiment.config import RunConfig
from specharness.experiment.design import get_profile
from specharness.experiment.engineset import engine_settings


def test_llama_8b_shape_takes_published_sizes_over_the_default_tokenizer(tmp_path: Path) -> None:
    model = resolve_model("shape:llama-8b")
    config = json.loads((model.serve_path / "config.json").read_text())
    default = json.loads((resolve_model("default").serve_path / "config.json").read_text())
    assert (config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]) == (4096, 14336, 32)
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]) == (32, 8, 128)
    assert config["vocab_size"] == default["vocab_size"] and config["eos_token_id"] == default["eos_token_id"]
    assert config["tie_word_embeddings"] is False
    assert (model.serve_path / "tokenizer.json").is_file()
    assert not any(model.serve_path.glob("*.safetensors"))
    assert model.random_weights and model.origin == "shape"
    settings = engine_settings(RunConfig(profile=get_profile("quick"), out_dir=tmp_path / "run"), model)
    assert settings.extra_args[:2] == ("--load-format", "dummy")


def test_rope_theta_goes_where_the_base_keeps_it() -> None:
    five = shape_config("llama-8b", {"rope_parameters": {"rope_theta": 1.0, "rope_type": "default"}, "_x": 1})
    assert five["rope_parameters"] == {"rope_theta": 500000.0, "rope_type": "default"} and "_x" not in five
    four = shape_config("smollm2-135m", {"rope_theta": 1.0})
    assert four["rope_theta"] == 100000.0 and four["hidden_size"] == SHAPES["smollm2-135m"]["hidden_size"]


def test_unknown_shape_names_the_known_ones() -> None:
    with pytest.raises(ModelError, match="shape:gpt-5: unknown shape; use one of llama-8b, smollm2-135m"):
        shape_config("gpt-5", {})
