"""``molsepnorm models``: the bundled models and pretrained encoders, as text and JSON."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from molsepnorm.checkpoint.bundled import BUNDLED, DEFAULT_MODEL
from molsepnorm.cli.main import cli


def test_models_lists_every_bundled_model_and_how_to_use_an_encoder():
    result = CliRunner().invoke(cli, ["models", "--json"])
    assert result.exit_code == 0, result.output
    listing = {entry["name"]: entry for entry in json.loads(result.output)}
    assert set(listing) == set(BUNDLED) and listing[DEFAULT_MODEL]["default"]
    encoders = [name for name, entry in listing.items() if entry["kind"] == "encoder"]
    assert {"molhiv-encoder", "moses-encoder", "moses-encoder-zinc"} <= set(encoders)
    for name in encoders:
        assert listing[name]["task"] == "pretrained" and listing[name]["steps"] > 0
    text = CliRunner().invoke(cli, ["models"])
    assert text.exit_code == 0, text.output
    for name in encoders:
        assert f"fine-tune it with:\n    molsepnorm train --init {name}\n" in text.output
    assert f"{DEFAULT_MODEL}  (default)" in text.output and "test: mae" in text.output
    for model in BUNDLED.values():  # an ensemble names its members, which single-model verbs take
        assert listing[model.name]["checkpoints"] == [str(p) for p in model.paths]
        members = "  members (each a --model of its own): " + ", ".join(p.stem for p in model.paths)
        assert (members in text.output) == model.is_ensemble
    assert max(len(line) for line in text.output.splitlines() if "model card:" not in line) <= 100  # wrapped
    from molsepnorm.checkpoint.bundled import resolve_model

    for model in BUNDLED.values():  # and each member's name is a model
        for path in model.paths if model.is_ensemble else ():
            assert Path(resolve_model(path.stem)) == path
