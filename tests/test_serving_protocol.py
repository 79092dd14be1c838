"""The whole Open Inference Protocol of `python -m pipeline serve`: every datatype's two forms (BYTES
and BF16 included), Triton's raw binary request, and the server's answers to what it cannot take, each
`{"error": "<one line>"}` with the server still serving after it."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from pipeline.core import bfloat16
from pipeline.serve import protocol, tensors
from pipeline.serve.signature import TensorSpec

# --- the elements of each datatype, without a server -------------------------------------------------

STRINGS = np.array([b"", b"a", "\u00e9t\u00e9".encode(), b"\x00\xff binary", b"x" * 300], dtype=object)


def test_bytes_round_trip_in_both_forms():
    raw = tensors.to_binary("BYTES", STRINGS)
    assert raw[:4] == b"\x00\x00\x00\x00" and raw[4:9] == b"\x01\x00\x00\x00a"  # little-endian length, then bytes
    back = tensors.from_binary("BYTES", raw, len(STRINGS), "x")
    assert back.dtype == object and list(back) == list(STRINGS)
    text = STRINGS[:3]
    assert list(tensors.from_json("BYTES", tensors.to_json("BYTES", text, "x"), 3, "x")) == list(text)


def test_bytes_from_a_runtime_may_be_str_and_json_needs_utf8():
    """ONNX Runtime gives strings as str objects, OpenVINO as a numpy str array: both are BYTES."""
    for given in (np.array(["ab", "\u00e9"], dtype=object), np.array(["ab", "\u00e9"])):
        assert tensors.datatype_of(given) == "BYTES"
        assert tensors.to_binary("BYTES", given) == b"\x02\x00\x00\x00ab\x02\x00\x00\x00\xc3\xa9"
    with pytest.raises(tensors.BadRequest, match=r"not UTF-8.*binary"):
        tensors.to_json("BYTES", STRINGS, "output 's'")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x05\x00\x00\x00ab", "claims 5 bytes, 2 are left"),
        (b"\x01\x00", "ends before BYTES element 0"),
        (b"\x01\x00\x00\x00a\x01\x00\x00\x00b!", "1 bytes of binary data after"),
    ],
)
def test_malformed_bytes_are_one_line(data: bytes, message: str):
    with pytest.raises(tensors.BadRequest, match=re.escape(message)):
        tensors.from_binary("BYTES", data, 2 if b"b!" in data else 1, "input 's'")


def test_bf16_is_uint16_bits_rounded_to_nearest_even():
    values = np.array([1.0, 1.00390625, 1.01171875, -2.5, np.inf, -np.inf, 3.4e38, 1e-40], np.float32)
    bits = bfloat16.from_float32(values)
    # 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to the even one (1); 1 + 3*2^-8 is a tie too: up to 1 + 2^-6
    assert bits[:4].tolist() == [0x3F80, 0x3F80, 0x3F82, 0xC020]
    assert bits[4:6].tolist() == [0x7F80, 0xFF80]
    assert np.isnan(bfloat16.to_float32(bfloat16.from_float32(np.array([np.nan], np.float32))))[0]
    exact = bfloat16.to_float32(bits)
    assert (bfloat16.from_float32(exact) == bits).all()  # float32 holds every bfloat16 exactly
    assert tensors.to_binary("BF16", bits) == bits.astype("<u2").tobytes()
    assert (tensors.from_binary("BF16", tensors.to_binary("BF16", bits), len(bits), "x") == bits).all()
    assert (tensors.from_json("BF16", tensors.to_json("BF16", bits, "x"), len(bits), "x") == bits).all()


def test_bf16_agrees_with_ml_dtypes():
    """tritonclient sends and reads BF16 with ml_dtypes.bfloat16: the same bits."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    values = np.random.default_rng(0).standard_normal(10_000).astype(np.float32) * 1e3
    assert (bfloat16.from_float32(values) == values.astype(ml_dtypes.bfloat16).view(np.uint16)).all()


def header(*inputs: dict) -> bytes:
    return json.dumps({"inputs": list(inputs)}).encode()


def test_bytes_and_bf16_requests_decode_alike_in_json_and_binary():
    bits = bfloat16.from_float32(np.array([[0.5, -3.0]], np.float32))
    as_json = header(
        {"name": "s", "shape": [2], "datatype": "BYTES", "data": ["ab", "c"]},
        {"name": "h", "shape": [1, 2], "datatype": "BF16", "data": [0.5, -3.0]},
    )
    strings = tensors.to_binary("BYTES", np.array([b"ab", b"c"], dtype=object))
    as_binary = header(
        {"name": "s", "shape": [2], "datatype": "BYTES", "parameters": {"binary_data_size": len(strings)}},
        {"name": "h", "shape": [1, 2], "datatype": "BF16", "parameters": {"binary_data_size": 4}},
    )
    expected = {"s": "BYTES", "h": "BF16"}
    one = protocol.decode(as_json, None, expected).inputs
    two = protocol.decode(as_binary + strings + bits.tobytes(), str(len(as_binary)), expected).inputs
    for inputs in (one, two):
        assert list(inputs["s"]) == [b"ab", b"c"] and inputs["h"].dtype == np.uint16
        assert (inputs["h"] == bits).all()


def test_outputs_encode_with_the_datatype_the_model_declares():
    """BF16 bits in uint16 say UINT16 by their dtype: `datatypes` names them BF16."""
    outputs = {"h": bfloat16.from_float32(np.array([1.5], np.float32)), "s": np.array(["x"], dtype=object)}
    body, headers = protocol.encode(outputs, protocol.InferRequest({}), "m", datatypes={"h": "BF16"})
    described = {o["name"]: o for o in json.loads(body)["outputs"]}
    assert described["h"]["datatype"] == "BF16" and described["h"]["data"] == [1.5]
    assert described["s"]["datatype"] == "BYTES" and described["s"]["data"] == ["x"]
    body, headers = protocol.encode(
        outputs, protocol.InferRequest({}, binary_outputs={"*"}), "m", datatypes={"h": "BF16"}
    )
    split = int(headers[protocol.HEADER_LENGTH])
    assert body[split:] == b"\xc0\x3f" + b"\x01\x00\x00\x00x"


def test_a_bytes_input_the_model_does_not_take_is_the_datatype_400():
    body = header({"name": "x", "shape": [1], "datatype": "BYTES", "data": ["a"]})
    with pytest.raises(protocol.BadRequest, match=re.escape("input 'x': datatype 'BYTES', the model takes FP32")):
        protocol.decode(body, None, {"x": "FP32"})


# --- Triton's raw binary request -----------------------------------------------------------------------


def test_a_raw_binary_request_deduces_its_one_free_dimension():
    data = np.arange(12, dtype=np.float32)
    decoded = protocol.decode_raw(data.tobytes(), TensorSpec("x", "FP32", [1, -1, 3]))
    assert decoded.inputs["x"].shape == (1, 4, 3) and decoded.inputs["x"].tobytes() == data.tobytes()
    assert decoded.binary_outputs == {"*"}  # Triton: every output binary
    strings = protocol.decode_raw(b"\x00raw bytes", TensorSpec("s", "BYTES", [1, 1])).inputs["s"]
    assert strings.shape == (1, 1) and strings[0, 0] == b"\x00raw bytes"  # the body is the element


@pytest.mark.parametrize(
    ("body", "spec", "message"),
    [
        (b"abc", TensorSpec("x", "FP32", [1, -1]), "3 bytes are not a whole number of 4-byte slices"),
        (b"abcd", TensorSpec("x", "FP32", [1, -1, -1]), "more than one dimension of any size"),
        (b"abcd", TensorSpec("x", "FP32", [1, 2]), "4 bytes of binary data, 2 FP32 elements need 8"),
        (b"abcd", TensorSpec("s", "BYTES", [1, 2]), "a BYTES input must hold one element"),
    ],
)
def test_a_raw_binary_request_whose_shape_cannot_follow_is_one_line(body: bytes, spec: TensorSpec, message: str):
    with pytest.raises(protocol.BadRequest, match=re.escape(message)) as caught:
        protocol.decode_raw(body, spec)
    assert "\n" not in str(caught.value)
