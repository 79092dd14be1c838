"""Inputs that look like real ones: symbolic dimensions, token kinds, fixed batches, padding."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.core.config import InputSpec
from pipeline.core.data import generate_inputs, padded_batches, run_batched
from pipeline.core.errors import ConfigError, ModelFileError
from pipeline.core.inputs import check_inputs, dims_of

TOKENS = {
    "input_ids": InputSpec(shape=["batch", "seq"], dtype="int64", kind="token_ids", high=500),
    "attention_mask": InputSpec(shape=["batch", "seq"], dtype="int64", kind="attention_mask", low=3),
    "token_type_ids": InputSpec(shape=["batch", "seq"], dtype="int64", kind="token_type_ids"),
}


def test_token_inputs_look_like_a_tokenizers_output():
    x = generate_inputs(TOKENS, 200, seed=0, dims={"seq": 16})
    ids, mask, types = x["input_ids"], x["attention_mask"], x["token_type_ids"]
    assert ids.shape == mask.shape == types.shape == (200, 16) and ids.dtype == np.int64
    assert set(np.unique(mask)) == {0, 1}
    lengths = mask.sum(1)
    assert lengths.min() >= 3 and lengths.max() == 16 and len(set(lengths)) > 5  # seeded lengths, some full
    assert (np.sort(mask, axis=1)[:, ::-1] == mask).all()  # a run of 1s, then 0s
    assert ids.max() < 500 and (ids[mask == 0] == 0).all() and (ids[mask == 1] > 0).mean() > 0.99
    assert (types[mask == 0] == 0).all() and (np.diff(types, axis=1)[mask[:, 1:] == 1] >= 0).all()
    assert 0 < (types.max(1) == 1).mean() < 1  # some rows are sentence pairs
    again = generate_inputs(TOKENS, 200, seed=0, dims={"seq": 16})
    assert all(np.array_equal(again[k], x[k]) for k in x)


def test_token_ids_take_the_vocabulary_from_the_model_or_ask_for_it():
    spec = {"ids": InputSpec(shape=["batch", 8], dtype="int64", kind="token_ids")}
    assert generate_inputs(spec, 50, 0, vocab_size=7)["ids"].max() < 7
    with pytest.raises(ConfigError, match=r"params.yaml: catalog.bert.inputs.ids.high: token_ids need the vocab"):
        generate_inputs(spec, 2, 0, field="catalog.bert")


def test_symbolic_dims_take_any_size_but_the_same_in_every_input():
    ok = {"input_ids": np.zeros((2, 40), np.int64), "attention_mask": np.ones((2, 40), np.int64),
          "token_type_ids": np.zeros((2, 40), np.int64)}  # fmt: skip
    assert check_inputs(ok, TOKENS, "x.npz")["input_ids"].shape == (2, 40)
    assert dims_of(ok, TOKENS) == {"seq": 40}
    with pytest.raises(ModelFileError, match=r"x.npz: dimension 'seq' is 30 in 'attention_mask' but 40 in 'input_ids'"):
        check_inputs(ok | {"attention_mask": np.ones((2, 30), np.int64)}, TOKENS, "x.npz")


def test_fixed_batches_are_padded_and_the_padding_dropped():
    inputs = {"x": np.arange(10, dtype=np.float32).reshape(5, 2)}
    chunks = list(padded_batches(inputs, 2))
    assert [real for _, real in chunks] == [2, 2, 1] and all(len(c["x"]) == 2 for c, _ in chunks)
    seen = []

    def run(batch):
        seen.append(len(batch["x"]))
        return {"y": batch["x"].sum(1)}

    out = run_batched(run, inputs, 2, fixed=True)
    assert seen == [2, 2, 2] and np.array_equal(out["y"], inputs["x"].sum(1))
    assert len(run_batched(run, inputs, 4)["y"]) == 5 and seen[-1] == 1  # not fixed: a short last batch


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"shape": ["batch", "seq"], "dtype": "float32", "kind": "attention_mask"},
            "attention_mask inputs are integers",
        ),
        ({"shape": ["batch"], "dtype": "int64", "kind": "token_ids"}, "have a sequence axis after the batch axis"),
        ({"shape": ["batch", 0]}, "dimensions must be positive integers or symbol names"),
        ({"shape": ["batch", "seq len"]}, "a symbolic dimension must be a name"),
    ],
)
def test_bad_specs_are_refused(spec, message):
    with pytest.raises(ValueError, match=message):
        InputSpec.model_validate(spec)


def test_fixed_batch_is_read_from_the_first_dimension():
    assert InputSpec(shape=[1, 3, 8, 8]).fixed_batch == 1
    assert InputSpec(shape=["batch", 3]).fixed_batch is None
    assert InputSpec(shape=["batch", "seq", 4]).shape_for(2, {"seq": 5}) == (2, 5, 4)


def test_an_array_named_as_litert_prints_the_tensor_is_taken_for_the_signatures_input(tmp_path):
    from pipeline.core.inputs import load_user_data, runtime_names

    specs = {"MNET_INPUT": InputSpec(shape=["batch", 3], dtype="float32")}
    assert runtime_names(["serving_default_MNET_INPUT:0", "labels"], specs) == {
        "serving_default_MNET_INPUT:0": "MNET_INPUT"
    }
    assert runtime_names(["MNET_INPUT:0"], specs) == {"MNET_INPUT:0": "MNET_INPUT"}
    assert runtime_names(["MNET_INPUT", "MNET_INPUT:0"], specs) == {}  # its own name wins
    np.savez(tmp_path / "rows.npz", **{"serving_default_MNET_INPUT:0": np.ones((4, 3), np.float32)})
    loaded = load_user_data(tmp_path / "rows.npz", specs, "--eval")
    assert list(loaded.inputs) == ["MNET_INPUT"] and not loaded.targets
