"""`python -m pipeline serve` over gRPC (KServe v2's grpc-v2), driven by Triton's own gRPC client: every
datatype of the every-datatype model bit for bit with `predict`, the health and metadata calls, and
each error as a status and one line with the server still serving after it. REST and gRPC share one
server process, one queue and one set of counters."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient import utils
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc

from pipeline.core.errors import PipelineError
from pipeline.serve import grpc_service, server, tensors
from pipeline.serve.predict import Predictor, load
from pipeline.serve.tensors import BadRequest
from tests.protocol_model import (
    SLOW_SPIN,
    assert_as_predict,
    assert_closed_form,
    call,
    growth,
    json_request,
    metrics,
    proto_inputs,
    protocol_deploy,
)

OUTPUTS = ["y", "ids_next", "text", "x_bf16", "h_float"]
DATATYPES = {"x": "FP32", "ids": "INT64", "h": "BF16", "spin": "INT64"}


@dataclass
class Served:
    folder: Path
    url: str  # REST
    grpc_url: str
    predict: Predictor


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """protocol_model's server: one instance, no request may wait (a second at once is refused), messages
    up to 1 MiB."""
    folder = protocol_deploy(tmp_path_factory.mktemp("proto") / "deploy")
    running = server.start(folder, options=["--instances", "1", "--max-queue", "0", "--max-body-mb", "1"])
    try:
        assert f"and gRPC on {running.grpc_url}" in running.banner()
        yield Served(folder, running.url, running.grpc_url, load(folder))
    finally:
        running.stop()


def grpc_infer(url: str, inputs: dict[str, np.ndarray], outputs: list[str] = OUTPUTS, **options) -> dict:
    """Through tritonclient.grpc (raw_input_contents): h as ml_dtypes.bfloat16, as the client wants BF16."""
    import ml_dtypes

    tensors_in = []
    for name, value in inputs.items():
        datatype = "BF16" if name == "h" else utils.np_to_triton_dtype(value.dtype)
        tensor = grpcclient.InferInput(name, list(value.shape), datatype)
        tensors_in.append(tensor.set_data_from_numpy(value.astype(ml_dtypes.bfloat16) if datatype == "BF16" else value))
    asked = [grpcclient.InferRequestedOutput(name) for name in outputs]
    result = grpcclient.InferenceServerClient(url).infer("proto", tensors_in, outputs=asked, **options)
    return {name: result.as_numpy(name) for name in outputs} | {"": result.get_response()}


def assert_still_serving(served: Served) -> None:
    inputs = proto_inputs(2, seed=9)
    got = grpc_infer(served.grpc_url, inputs)
    assert_as_predict(got, served.predict(inputs))


def refused(send: Callable[[], object]) -> tuple[str, str]:
    """The status code's name and the message of a call the server refused (through tritonclient or the stub)."""
    try:
        send()
    except utils.InferenceServerException as error:
        assert error.status(), f"refused by the client, not the server: {error.message()}"
        return error.status().removeprefix("StatusCode."), error.message()
    except grpc.RpcError as error:
        return error.code().name, error.details()
    raise AssertionError("the server answered")


def test_every_datatype_through_tritonclient_grpc_is_what_predict_returns(served: Served):
    """FP32, INT64, BYTES and BF16 in and out, raw both ways; the outputs asked for, in their order; the id."""
    inputs = proto_inputs(seed=1)
    got = grpc_infer(served.grpc_url, inputs, request_id="req-7")
    assert got["x_bf16"].dtype.name == "bfloat16" and got["text"].dtype == object
    response = got.pop("")
    assert response.id == "req-7" and response.model_name == "proto" and response.model_version == "1"
    assert [o.datatype for o in response.outputs] == ["FP32", "INT64", "BYTES", "BF16", "FP32"]
    assert_as_predict(got, served.predict(inputs))
    assert_closed_form(got, inputs)  # and not only predict's answer: the graph's own
    some = grpc_infer(served.grpc_url, inputs, ["text", "y"])
    assert [o.name for o in some.pop("").outputs] == ["text", "y"]
    assert_as_predict(some, {k: v for k, v in served.predict(inputs).items() if k in some})


def test_compressed_messages_are_bounded_by_their_inflated_size(served: Served):
    """gRPC's own compression (tritonclient.grpc's compression_algorithm); --max-body-mb bounds the message
    inflated, as REST bounds an inflated body."""
    inputs = proto_inputs(seed=5)
    for algorithm in ("gzip", "deflate"):
        assert_as_predict(grpc_infer(served.grpc_url, inputs, compression_algorithm=algorithm), served.predict(inputs))
    zeros = {name: np.zeros_like(value) for name, value in proto_inputs(70_000).items()}  # 4.5 MB, inflated
    code, message = refused(lambda: grpc_infer(served.grpc_url, zeros, compression_algorithm="gzip"))
    assert code == "RESOURCE_EXHAUSTED" and "Decompressed message larger than max" in message
    assert_still_serving(served)


def test_health_and_metadata_say_what_rest_says(served: Served):
    client = grpcclient.InferenceServerClient(served.grpc_url)
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("proto") and client.is_model_ready("proto", "1")
    assert not client.is_model_ready("other") and not client.is_model_ready("proto", "2")
    metadata = client.get_server_metadata()
    assert (metadata.name, list(metadata.extensions)) == ("modelopt-pipeline", ["binary_tensor_data"])
    rest = json.loads(call(served.url, "GET", "/v2/models/proto")[2])
    got = client.get_model_metadata("proto")
    assert (got.name, list(got.versions), got.platform) == (rest["name"], rest["versions"], rest["platform"])
    for tensors_got, described in ((got.inputs, rest["inputs"]), (got.outputs, rest["outputs"])):
        assert [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in tensors_got] == described
    assert [t.datatype for t in got.inputs] == ["FP32", "INT64", "BF16", "INT64"]


def stub(served: Served):
    return service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(served.grpc_url))


def typed_request() -> pb.ModelInferRequest:
    """x, ids and spin in their typed contents, h in fp32_contents (BF16 has no typed field)."""
    inputs = proto_inputs(1)
    fields = {"x": "fp32_contents", "ids": "int64_contents", "h": "fp32_contents", "spin": "int64_contents"}
    request = pb.ModelInferRequest(model_name="proto")
    for name, value in inputs.items():
        tensor = request.inputs.add(name=name, datatype=DATATYPES[name], shape=value.shape)
        getattr(tensor.contents, fields[name]).extend(value.ravel().tolist())
    return request


def error_cases(served: Served) -> dict[str, tuple[Callable[[], object], str, str]]:
    """name: (the call, the status code, a piece of the line)."""
    url, good = served.grpc_url, proto_inputs(2)
    client = grpcclient.InferenceServerClient(url)
    nan = {**good, "x": np.full((2, 4), np.nan, np.float32)}
    return {
        "unknown model": (lambda: client.infer("other", []), "NOT_FOUND", "unknown model 'other'"),
        "unknown version": (lambda: client.get_model_metadata("proto", "2"), "NOT_FOUND", "unknown version '2'"),
        "wrong datatype": (lambda: grpc_infer(url, {**good, "x": good["x"].astype(np.float64)}), "INVALID_ARGUMENT",
                           "input 'x': datatype 'FP64', the model takes FP32"),
        "wrong rank": (lambda: grpc_infer(url, {**good, "ids": good["ids"].ravel()}), "INVALID_ARGUMENT",
                       "array 'ids' has shape (8,)"),
        "NaN": (lambda: grpc_infer(url, nan), "INVALID_ARGUMENT", "array 'x' row 0 holds nan"),
        "unknown output": (lambda: grpc_infer(url, good, ["y", "z"]), "INVALID_ARGUMENT", "no such output"),
        "BF16 in typed contents": (lambda: stub(served).ModelInfer(typed_request()), "INVALID_ARGUMENT",
                                   "input 'h': BF16 has no typed contents field: send it in raw_input_contents"),
        "message over --max-body-mb": (lambda: grpc_infer(url, proto_inputs(70_000)), "RESOURCE_EXHAUSTED",
                                       "larger than max"),
        "uncaught (ONNX Runtime refuses x's shape)": (
            lambda: grpc_infer(url, {**good, "x": np.ones((2, 3), np.float32)}), "INTERNAL", "internal error"),
        "unimplemented": (lambda: client.get_model_repository_index(), "UNIMPLEMENTED",
                          "RepositoryIndex: not served here"),
        "unimplemented streaming": (lambda: list(stub(served).ModelStreamInfer(iter([pb.ModelInferRequest()]))),
                                    "UNIMPLEMENTED", "ModelStreamInfer: not served here"),
    }  # fmt: skip


def test_every_error_is_a_status_and_one_line_and_the_server_keeps_serving(served: Served):
    for case, (send, code, text) in error_cases(served).items():
        got_code, message = refused(send)
        assert (got_code, "\n" in message) == (code, False) and text in message, (case, got_code, message)
        assert_still_serving(served)


def test_a_full_queue_is_unavailable_as_in_triton_and_rest_and_grpc_share_it(served: Served):
    """One instance, no waiting place: while a slow gRPC request runs, another is refused over gRPC
    (UNAVAILABLE, as Triton) and over REST (503), and both refusals are counted."""
    before = metrics(served.url)
    in_flight = 'modelopt_inference_in_flight{model="proto",version="1"}'
    slow = proto_inputs(1, spin=SLOW_SPIN)
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(grpc_infer, served.grpc_url, slow)
        deadline = time.monotonic() + 30
        while metrics(served.url)[in_flight] != 1:
            assert time.monotonic() < deadline and not running.done(), "the slow request never ran"
            time.sleep(0.02)
        code, message = refused(lambda: grpc_infer(served.grpc_url, proto_inputs(1)))
        assert code == "UNAVAILABLE" and "the server is full" in message and "\n" not in message
        status, _, content = call(served.url, "POST", "/v2/models/proto/infer", json_request(proto_inputs(1)))
        assert status == 503 and b"the server is full" in content
        got = running.result()
    assert_as_predict(got, served.predict(slow))
    grew = growth(before, metrics(served.url))
    assert grew['nv_inference_request_failure_total{model="proto",reason="REJECTED",version="1"}'] == 2
    assert grew['modelopt_grpc_responses_total{code="UNAVAILABLE"}'] == 1
    assert grew['nv_inference_request_success_total{model="proto",version="1"}'] == 1
    assert_still_serving(served)


def test_metrics_count_grpc_requests_as_rest_ones(served: Served):
    before = metrics(served.url)
    refused(lambda: grpc_infer(served.grpc_url, {**proto_inputs(2), "x": np.full((2, 4), np.nan, np.float32)}))
    assert_still_serving(served)
    grew = growth(before, metrics(served.url))
    assert grew['nv_inference_request_success_total{model="proto",version="1"}'] == 1
    assert grew['nv_inference_request_failure_total{model="proto",reason="OTHER",version="1"}'] == 1
    assert grew['modelopt_grpc_responses_total{code="OK"}'] == 1
    assert grew['modelopt_grpc_responses_total{code="INVALID_ARGUMENT"}'] == 1


# --- requests decoded without a server ----------------------------------------------------------------


def test_typed_contents_decode_as_raw_contents_do():
    """Every datatype with a typed field, from it and from raw_input_contents: the same arrays."""
    values = {
        "b": ("BOOL", "bool_contents", np.array([[True, False]])),
        "i8": ("INT8", "int_contents", np.array([[-128, 127]], np.int8)),
        "u16": ("UINT16", "uint_contents", np.array([[0, 65535]], np.uint16)),
        "i64": ("INT64", "int64_contents", np.array([[-(2**62), 2**62]], np.int64)),
        "u64": ("UINT64", "uint64_contents", np.array([[0, 2**64 - 1]], np.uint64)),
        "f32": ("FP32", "fp32_contents", np.array([[1.1, -3e38]], np.float32)),
        "f64": ("FP64", "fp64_contents", np.array([[1.1, -1e300]])),
        "s": ("BYTES", "bytes_contents", np.array([[b"", b"\x00\xff \xc3\xa9"]], dtype=object)),
    }
    typed, raw = pb.ModelInferRequest(id="r"), pb.ModelInferRequest()
    for name, (datatype, field, value) in values.items():
        tensor = typed.inputs.add(name=name, datatype=datatype, shape=value.shape)
        getattr(tensor.contents, field).extend(value.ravel().tolist())
        raw.inputs.add(name=name, datatype=datatype, shape=value.shape)
        raw.raw_input_contents.append(tensors.to_binary(datatype, value))
    expected = {name: datatype for name, (datatype, _, _) in values.items()}
    one, two = grpc_service.decode(typed, expected), grpc_service.decode(raw, expected)
    assert one.id == "r" and two.id is None and one.requested is None
    for name, (_, _, value) in values.items():
        for got in (one.inputs[name], two.inputs[name]):
            assert got.dtype == value.dtype and got.shape == value.shape and list(got.ravel()) == list(value.ravel())


def malformed() -> dict[str, tuple[pb.ModelInferRequest, dict[str, str], str]]:
    def request(*inputs: tuple[str, str, list[int]], raw: list[bytes] = ()) -> pb.ModelInferRequest:
        made = pb.ModelInferRequest(raw_input_contents=raw)
        for name, datatype, shape in inputs:
            made.inputs.add(name=name, datatype=datatype, shape=shape)
        return made

    x = ("x", "FP32", [1, 2])
    int8 = request(("c", "INT8", [1]))
    int8.inputs[0].contents.int_contents.append(300)
    both = request(x, raw=[b"\x00" * 8])
    both.inputs[0].contents.fp32_contents.extend([1, 2])
    shared = request(x, raw=[b"\x00" * 8])
    shared.inputs[0].parameters["shared_memory_region"].string_param = "region"
    fp32 = {"x": "FP32"}
    return {
        "a count of raw contents": (request(x, raw=[b"", b""]), fp32, "2 raw_input_contents for 1 inputs"),
        "raw bytes short": (request(x, raw=[b"\x00" * 4]), fp32, "4 bytes of binary data, 2 FP32 elements need 8"),
        "typed values short": (request(x), fp32, "input 'x': contents.fp32_contents holds 0 values, its shape needs 2"),
        "FP16 typed": (request(("x", "FP16", [1])), {"x": "FP16"}, "FP16 has no typed contents field"),
        "INT8 out of range": (int8, {"c": "INT8"}, "contents.int_contents is not a list of INT8 values"),
        "typed and raw": (both, fp32, "typed contents in a request with raw_input_contents"),
        "shared memory": (shared, fp32, "input 'x': shared memory is not served"),
        "negative dimension": (request(("x", "FP32", [-1, 2])), fp32, "'shape' must be a list of non-negative"),
        "unknown input": (request(("z", "FP32", [1])), fp32, "input 'z': the model has no such input"),
    }


@pytest.mark.parametrize("case", list(malformed()))
def test_a_malformed_request_is_one_line_naming_what_is_wrong(case: str):
    request, expected, text = malformed()[case]
    with pytest.raises(BadRequest) as caught:
        grpc_service.decode(request, expected)
    assert text in str(caught.value) and "\n" not in str(caught.value)


def test_serve_refuses_one_port_for_both(tmp_path: Path):
    with pytest.raises(PipelineError, match="--grpc-port 9000 must be a free port other than --port"):
        server.serve(tmp_path, "127.0.0.1", 9000, grpc_port=9000)
