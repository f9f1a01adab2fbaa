"""gptcore.config: every value a config is given, from a flag, a widget or a file, is judged by its field's Setting."""
import re

import pytest

from gptcore.config import ConfigError, GPTConfig, TrainConfig, TrainConfigError, settings


@pytest.mark.parametrize("value", [["cosine"], {"x": 1}, 3, None])
def test_a_choice_of_the_wrong_kind_is_refused_with_the_fields_range(value):
    expected = f"schedule must be one of constant, cosine, warmdown, got {value!r}"
    with pytest.raises(TrainConfigError, match=re.escape(expected)):
        TrainConfig.from_dict({"schedule": value})  # as a meta.json written by hand would give it
    with pytest.raises(ConfigError, match="norm must be rms or layer"):
        GPTConfig.from_dict({"norm": value})


def test_a_whole_number_too_large_for_a_float_is_out_of_range_not_a_crash():
    with pytest.raises(ConfigError, match="norm_eps must be a number greater than 0 and less than 1, got 1000"):
        GPTConfig.from_dict({"norm_eps": 10 ** 400})
    with pytest.raises(TrainConfigError, match="lr must be a number greater than 0 and at most 10,000, got 1000"):
        TrainConfig.from_dict({"lr": 10 ** 400})
    assert TrainConfig.from_dict({"lr": 1}).lr == 1  # a whole number is still a number


def test_lengths_are_said_in_tokens_which_are_characters_for_the_char_tokenizer():
    model, train = settings(GPTConfig), settings(TrainConfig)
    assert model["context"].label == "Context (tokens)"
    assert model["context"].help == "How many previous tokens (characters for the char tokenizer) the model can see."
    assert train["sample_chars"].label == "Tokens per sample"
    assert "characters" not in train["batch_size"].help and "tokens" in train["batch_size"].help
