"""The whole Open Inference Protocol of `python -m pipeline serve`: every datatype's two forms (BYTES
and BF16 included), Triton's raw binary request, and the server's answers to what it cannot take, each
`{"error": "<one line>"}` with the server still serving after it."""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.client import HTTPConnection
from pathlib import Path

import numpy as np
import pytest

# tritonclient is a dependency (pyproject.toml, its [http] extra with the tests): missing, it is an install error
import tritonclient.http as http
import tritonclient.utils as utils

from pipeline.core import bfloat16
from pipeline.serve import errors, protocol, server, tensors
from pipeline.serve.predict import load
from pipeline.serve.signature import TensorSpec
from tests.protocol_model import (
    SLOW_SPIN,
    answered,
    assert_as_predict,
    assert_closed_form,
    call,
    growth,
    json_request,
    metrics,
    proto_inputs,
    protocol_deploy,
)

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
    import ml_dtypes  # a core dependency (pipeline.core.bfloat16)

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


# --- the runtimes carry BF16 as float32 -----------------------------------------------------------------


def bf16_model(path: Path) -> Path:
    """h (BF16) -> h_float (FP32), and x (FP32) -> x_bf16 (BF16): a Cast each way."""
    from onnx import TensorProto, helper, save

    graph = helper.make_graph(
        [helper.make_node("Cast", ["h"], ["h_float"], to=TensorProto.FLOAT),
         helper.make_node("Cast", ["x"], ["x_bf16"], to=TensorProto.BFLOAT16)],
        "bf16",
        [helper.make_tensor_value_info("h", TensorProto.BFLOAT16, ["n"]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("h_float", TensorProto.FLOAT, ["n"]),
         helper.make_tensor_value_info("x_bf16", TensorProto.BFLOAT16, ["n"])],
    )  # fmt: skip
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_the_runtimes_take_and_give_bf16_as_float32(tmp_path: Path, runtime: str):
    """ONNX Runtime's numpy door refuses bfloat16; OpenVINO read float32 bytes as bfloat16 and labelled
    bfloat16 results float16. Both now take and give float32 for a bfloat16 port."""
    from pipeline.runtimes.ort import OrtSession
    from pipeline.runtimes.ov import Config, OpenVinoSession

    path = bf16_model(tmp_path / "bf16.onnx")
    session = OrtSession(path, 1) if runtime == "onnxruntime" else OpenVinoSession(path, 1, Config())
    x = np.array([1.5, 3.14159, -1e-3, np.inf], np.float32)
    out = session.run({"h": x, "x": x})
    rounded = bfloat16.to_float32(bfloat16.from_float32(x))
    assert out["h_float"].dtype == out["x_bf16"].dtype == np.float32
    assert out["h_float"].tobytes() == out["x_bf16"].tobytes() == rounded.tobytes()
    assert session.run({"h": x[:0], "x": x[:0]})["x_bf16"].shape == (0,)


# --- the server: a model of every datatype ------------------------------------------------------------


@pytest.fixture(scope="module")
def proto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """protocol_model's server: one instance, one request may wait, bodies up to 1 MiB. (folder, url)"""
    folder = protocol_deploy(tmp_path_factory.mktemp("proto") / "deploy")
    running = server.start(folder, options=["--instances", "1", "--max-queue", "1", "--max-body-mb", "1"])
    try:
        yield folder, running.url
    finally:
        running.stop()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A one-input model's server (x: FP32 [batch, 16]) with the default limits, REST only: raw binary
    requests."""
    from benchmarks.smoke import smoke_deploy

    folder = smoke_deploy(tmp_path_factory.mktemp("tiny") / "deploy")
    running = server.start(folder, options=["--grpc-port", "0"])
    try:
        assert "up to 4 requests queued" in running.banner()  # 4 per instance, one instance here
        assert "(no gRPC)" in running.banner() and running.grpc_url is None
        yield folder, running.url
    finally:
        running.stop()


def triton_infer(
    url: str, inputs: dict[str, np.ndarray], binary: bool, client=None, **options
) -> dict[str, np.ndarray]:
    """Through tritonclient.http (`client`, or a new one); BF16 tensors binary whatever `binary` says (the
    client sends BF16 only so), the h input as ml_dtypes.bfloat16, as the client wants it."""
    import ml_dtypes

    client = client or http.InferenceServerClient(url)
    tensors_in = []
    for name, value in inputs.items():
        given = value.astype(ml_dtypes.bfloat16) if name == "h" else value
        tensor = http.InferInput(
            name, list(value.shape), "BF16" if name == "h" else utils.np_to_triton_dtype(value.dtype)
        )
        tensors_in.append(tensor.set_data_from_numpy(given, binary_data=binary or name == "h"))
    names = ["y", "ids_next", "text", "x_bf16", "h_float"]
    outputs = [http.InferRequestedOutput(name, binary_data=binary) for name in names]
    result = client.infer("proto", tensors_in, outputs=outputs, **options)
    return {name: result.as_numpy(name) for name in names}


@pytest.mark.parametrize("binary", [True, False])
def test_every_datatype_through_tritonclient_is_what_predict_returns(proto, binary: bool):
    """FP32, INT64, BYTES and BF16 in and out, as binary tensors and as JSON."""
    folder, url = proto
    inputs = proto_inputs(seed=int(binary))
    expected = load(folder)(inputs)
    got = triton_infer(url, inputs, binary)
    assert got["x_bf16"].dtype.name == "bfloat16" and got["text"].dtype == object
    assert_as_predict(got, expected)
    assert_closed_form(got, inputs)  # and not only predict's answer: the graph's own


@pytest.mark.parametrize("compression", ["gzip", "deflate"])
def test_compressed_requests_and_responses(proto, compression: str):
    """tritonclient's request_compression_algorithm and response_compression_algorithm."""
    folder, url = proto
    inputs = proto_inputs(seed=5)
    options = {"request_compression_algorithm": compression, "response_compression_algorithm": compression}
    assert_as_predict(triton_infer(url, inputs, True, **options), load(folder)(inputs))
    status, headers, _ = call(
        url, "POST", "/v2/models/proto/infer", json_request(inputs), {"Accept-Encoding": compression}
    )
    assert status == 200 and headers["content-encoding"] == compression


def assert_one_line_error(status: int, headers: dict, content: bytes, expected_status: int, text: str) -> str:
    assert status == expected_status, content
    assert headers["content-type"] == "application/json"
    error = json.loads(content)
    assert list(error) == ["error"] and "\n" not in error["error"] and text in error["error"], error
    return error["error"]


def assert_still_serving(folder: Path, url: str) -> None:
    """A valid JSON request (BF16 as numbers) gets what predict returns, every output JSON."""
    inputs = proto_inputs(2, seed=9)
    status, _, content = call(url, "POST", "/v2/models/proto/infer", json_request(inputs))
    assert status == 200, content
    expected = load(folder)(inputs)
    outputs = json.loads(content)["outputs"]
    assert [o["datatype"] for o in outputs] == ["FP32", "INT64", "BYTES", "BF16", "FP32"]
    assert_as_predict({o["name"]: np.asarray(o["data"], expected[o["name"]].dtype) for o in outputs}, expected)


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data)


def errors_cases(url: str) -> dict[str, tuple[tuple, int, str]]:
    """name: (call's arguments, status, a piece of the line)."""
    good = json_request(proto_inputs(2))
    bad_tensor = json_request({**proto_inputs(2), "x": np.full((2, 4), np.nan, np.float32)})
    bytes_input = json.dumps({"inputs": [{"name": "x", "shape": [1], "datatype": "BYTES", "data": ["a"]}]}).encode()
    infer = "/v2/models/proto/infer"
    return {
        "unknown route": (("GET", "/v3/anything"), 404, "GET /v3/anything: no such route"),
        "unknown model": (("POST", "/v2/models/other/infer", good), 404, "unknown model 'other'"),
        "wrong method": (("GET", infer), 405, "method not allowed (allowed: POST)"),
        "wrong method on metadata": (("DELETE", "/v2/models/proto"), 405, "method not allowed"),
        "bad tensor": (("POST", infer, bad_tensor), 400, "array 'x' row 0 holds nan"),
        "BYTES the model does not take": (("POST", infer, bytes_input), 400, "datatype 'BYTES', the model takes FP32"),
        "not JSON": (("POST", infer, b"{inputs"), 400, "not JSON"),
        "raw binary, four inputs": (("POST", infer, b"1234", {"Inference-Header-Content-Length": "0"}), 400,
                                    "feeds a model of one input; proto takes 4 (x, ids, h, spin)"),
        "unknown encoding": (("POST", infer, good, {"Content-Encoding": "br"}), 415, "Content-Encoding 'br'"),
        "not gzip": (("POST", infer, b"plain", {"Content-Encoding": "gzip"}), 400, "not valid gzip data"),
        "truncated gzip": (("POST", infer, gzipped(good)[:-12], {"Content-Encoding": "gzip"}), 400, "ends before"),
        "body over the limit": (("POST", infer, b" " * (2**20 + 1)), 413, "Content-Length, 1048577 bytes, exceeds"),
        "gzip inflating past the limit": (("POST", infer, gzipped(b" " * 2**21 + good), {"Content-Encoding": "gzip"}),
                                          413, "the gzip body, inflated, exceeds"),
        "uncaught (ONNX Runtime refuses x's shape)": (
            ("POST", infer, json_request({**proto_inputs(2), "x": np.ones((2, 3), np.float32)})),
            500, "internal error",
        ),
    }  # fmt: skip


def test_every_error_is_one_line_of_json_and_the_server_keeps_serving(proto):
    folder, url = proto
    for case, (arguments, status, text) in errors_cases(url).items():
        line = assert_one_line_error(*call(url, *arguments), status, text)
        assert line, case
        assert_still_serving(folder, url)


def test_tritonclient_reads_the_errors(proto):
    """The client raises InferenceServerException with the status and the line."""
    folder, url = proto
    with pytest.raises(utils.InferenceServerException) as caught:
        triton_infer(url, {**proto_inputs(2), "x": np.ones((2, 3), np.float32)}, True)
    assert caught.value.status() == "500" and "INVALID_ARGUMENT" in caught.value.message()
    with pytest.raises(utils.InferenceServerException) as caught:
        http.InferenceServerClient(url).get_model_metadata("proto", "7")
    assert caught.value.status() == "404" and "version '7'" in caught.value.message()
    client = http.InferenceServerClient(url)  # keep-alive: the refused body, unread, must not break the next
    for _ in range(2):
        with pytest.raises(utils.InferenceServerException) as caught:
            triton_infer(url, proto_inputs(70_000), True, client)  # 4.5 MB
        assert caught.value.status() == "413" and "limit of 1048576 bytes" in caught.value.message()
        inputs = proto_inputs(seed=3)
        assert_as_predict(triton_infer(url, inputs, True, client), load(folder)(inputs))
    assert_still_serving(folder, url)


def test_a_body_over_the_limit_is_refused_before_and_while_it_is_read(proto):
    """413 from Content-Length alone (no byte of the body sent), and from a chunked body once it passes."""
    folder, url = proto
    connection = HTTPConnection(url, timeout=60)
    connection.putrequest("POST", "/v2/models/proto/infer")
    connection.putheader("Content-Length", str(10 * 2**20))
    connection.endheaders()  # and no body: the answer comes from the header
    assert_one_line_error(*answered(connection), 413, "Content-Length, 10485760 bytes")
    connection.close()
    chunks = (b" " * 2**16 for _ in range(20))  # 1.25 MiB without a Content-Length
    connection = HTTPConnection(url, timeout=60)
    connection.request("POST", "/v2/models/proto/infer", chunks, encode_chunked=True)
    assert_one_line_error(*answered(connection), 413, "so far")
    connection.close()
    assert_still_serving(folder, url)


def test_a_full_queue_is_503_with_retry_after_and_counted(proto):
    """One instance and one waiting place: a third request at once is refused, not queued."""
    folder, url = proto
    before = metrics(url)
    slow = json_request(proto_inputs(1, spin=SLOW_SPIN))
    with ThreadPoolExecutor(2) as pool:
        running = [pool.submit(call, url, "POST", "/v2/models/proto/infer", slow) for _ in range(2)]
        deadline = time.monotonic() + 30
        while True:  # until one runs on the instance and one waits for it
            now = metrics(url)
            if now['modelopt_inference_in_flight{model="proto",version="1"}'] == 1 and (
                now['nv_inference_pending_request_count{model="proto",version="1"}'] == 1
            ):
                break
            assert time.monotonic() < deadline and not any(f.done() for f in running), "never one in flight, one queued"
            time.sleep(0.02)
        status, headers, content = call(url, "POST", "/v2/models/proto/infer", json_request(proto_inputs(1)))
        assert_one_line_error(status, headers, content, 503, "the server is full")
        assert headers["retry-after"] == "1"
        assert [f.result()[0] for f in running] == [200, 200]
    after = metrics(url)
    rejected = 'nv_inference_request_failure_total{model="proto",reason="REJECTED",version="1"}'
    assert after[rejected] - before.get(rejected, 0) == 1
    assert (
        after['modelopt_http_responses_total{status="503"}']
        - before.get('modelopt_http_responses_total{status="503"}', 0)
        == 1
    )
    success = 'nv_inference_request_success_total{model="proto",version="1"}'
    assert after[success] - before[success] == 2
    count = 'modelopt_inference_request_duration_seconds_count{model="proto",version="1"}'
    slowest = 'modelopt_inference_request_duration_seconds_bucket{le="0.1",model="proto",version="1"}'
    assert after[count] - before[count] == 2 and after[slowest] - before[slowest] == 0  # both took > 0.1 s
    assert_still_serving(folder, url)


def test_metrics_count_every_outcome(proto):
    folder, url = proto
    before = metrics(url)
    call(url, "GET", "/nowhere")
    call(url, "POST", "/v2/models/proto/infer", b"{inputs")
    assert_still_serving(folder, url)
    grew = growth(before, metrics(url))
    assert grew['modelopt_http_responses_total{status="404"}'] == 1
    assert grew['modelopt_http_responses_total{status="400"}'] == 1
    assert grew['nv_inference_request_failure_total{model="proto",reason="OTHER",version="1"}'] == 1
    assert grew['nv_inference_request_success_total{model="proto",version="1"}'] == 1


def test_a_raw_binary_request_feeds_the_one_input(tiny):
    """Triton's raw binary request: the body is x's data, batch 1 (Triton's rule for a batching model)."""
    folder, url = tiny
    x = np.random.default_rng(1).standard_normal((1, 16)).astype(np.float32)
    status, headers, content = call(url, "POST", "/v2/models/tiny/infer", x.tobytes(),
                                    {"Inference-Header-Content-Length": "0"})  # fmt: skip
    assert status == 200, content
    split = int(headers["inference-header-content-length"])
    (y,) = json.loads(content[:split])["outputs"]
    assert y["parameters"]["binary_data_size"] == 16 and y["shape"] == [1, 4]  # every output binary
    assert content[split:] == load(folder)(x)["y"].tobytes()
    wrong = call(url, "POST", "/v2/models/tiny/infer", x.tobytes()[:-4], {"Inference-Header-Content-Length": "0"})
    assert_one_line_error(*wrong, 400, "60 bytes of binary data, 16 FP32 elements need 64")


def test_a_validation_error_is_one_line():
    """FastAPI's RequestValidationError (its 422 {"detail": [...]}) is a 400 with one line too."""
    from fastapi.exceptions import RequestValidationError
    from starlette.requests import Request

    request = Request({"type": "http", "method": "POST", "path": "/v2/x", "query_string": b"", "headers": []})
    error = RequestValidationError([{"loc": ("path", "version"), "msg": "Input should be\na valid integer"}])
    response = asyncio.run(errors.answer(request, error))
    assert response.status_code == 400
    assert json.loads(response.body) == {"error": "POST /v2/x: path.version: Input should be a valid integer"}
