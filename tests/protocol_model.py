"""The every-datatype model behind tests/test_serving_protocol.py and tests/test_serving_grpc.py: its
deploy folder, its inputs, and plain HTTP calls to its server (its JSON requests, /metrics)."""

from __future__ import annotations

import json
from http.client import HTTPConnection
from pathlib import Path

import numpy as np

from pipeline.core import bfloat16

SIDE = 96  # the spin loop's matrix: about 20 us a turn on one thread
SLOW_SPIN = 150_000  # turns that keep an instance busy for about 3 s: a loaded CI still sees it busy


def protocol_model(path: Path) -> None:
    """Inputs x (FP32), ids (INT64), h (BF16), spin (INT64); outputs y = 2x (FP32, after `spin`'s largest
    value turns of a matrix loop: a request as slow as the test needs), ids_next = ids + 1 (INT64), text =
    x as strings (BYTES), x_bf16 = x rounded (BF16) and h_float = h (FP32). The file fixes x's second
    axis to 4 while the manifest lets it vary: another size reaches ONNX Runtime and fails there (500)."""
    from onnx import TensorProto as T
    from onnx import checker, helper, numpy_helper, save

    weights = np.random.default_rng(0).standard_normal((SIDE, SIDE)).astype(np.float32) / SIDE**0.5
    consts = {"w": weights, "m0": np.eye(SIDE, dtype=np.float32), "zero": np.float32(0), "two": np.float32(2),
              "one": np.int64(1)}  # fmt: skip
    initializers = [numpy_helper.from_array(np.asarray(value), name) for name, value in consts.items()]
    state = [helper.make_tensor_value_info(name, T.FLOAT, [SIDE, SIDE]) for name in ("m", "m_next")]
    turn = helper.make_graph(
        [helper.make_node("Identity", ["go"], ["go_on"]), helper.make_node("MatMul", ["m", "w"], ["mw"]),
         helper.make_node("Tanh", ["mw"], ["m_next"])],
        "turn",
        [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("go", T.BOOL, []), state[0]],
        [helper.make_tensor_value_info("go_on", T.BOOL, []), state[1]],
        initializers[:1],
    )  # fmt: skip
    nodes = [
        helper.make_node("ReduceMax", ["spin"], ["turns"], keepdims=0),
        helper.make_node("Loop", ["turns", "", "m0"], ["spun"], body=turn),
        helper.make_node("ReduceSum", ["spun"], ["total"], keepdims=0),
        helper.make_node("Mul", ["total", "zero"], ["nothing"]),
        helper.make_node("Mul", ["x", "two"], ["twice"]),
        helper.make_node("Add", ["twice", "nothing"], ["y"]),
        helper.make_node("Add", ["ids", "one"], ["ids_next"]),
        helper.make_node("Cast", ["x"], ["text"], to=T.STRING),
        helper.make_node("Cast", ["x"], ["x_bf16"], to=T.BFLOAT16),
        helper.make_node("Cast", ["h"], ["h_float"], to=T.FLOAT),
    ]
    inputs = {"x": T.FLOAT, "ids": T.INT64, "h": T.BFLOAT16, "spin": T.INT64}
    outputs = {"y": T.FLOAT, "ids_next": T.INT64, "text": T.STRING, "x_bf16": T.BFLOAT16, "h_float": T.FLOAT}
    graph = helper.make_graph(
        nodes,
        "protocol",
        [helper.make_tensor_value_info(n, t, ["batch", 1 if n == "spin" else 4]) for n, t in inputs.items()],
        [helper.make_tensor_value_info(n, t, ["batch", 4]) for n, t in outputs.items()],
        initializers[1:],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    checker.check_model(model, full_check=True)
    save(model, path)


def protocol_deploy(folder: Path) -> Path:
    """A deploy folder of protocol_model, laid out as the select stage lays one out (no measurements)."""
    from pipeline.core.config import InputSpec
    from pipeline.core.files import sha256
    from pipeline.core.records import manifest as manifest_record
    from pipeline.core.records.manifest import Manifest

    folder.mkdir(parents=True)
    protocol_model(folder / "model.onnx")
    shapes = {"x": ["batch", "n"], "ids": ["batch", 4], "h": ["batch", 4], "spin": ["batch", 1]}
    dtypes = {"x": "float32", "ids": "int64", "h": "float32", "spin": "int64"}  # BF16 h: float32 values
    inputs = {name: InputSpec.model_validate({"shape": shape, "dtype": dtypes[name]}) for name, shape in shapes.items()}
    manifest = Manifest(
        model="proto", variant="onnx_fp32", machine="test", runtime="onnxruntime", runtime_version="test",
        entry="model.onnx", inputs=inputs, outputs=["y", "ids_next", "text", "x_bf16", "h_float"],
        files={"model.onnx": sha256(folder / "model.onnx")},
    )  # fmt: skip
    manifest_record.write(manifest, folder)
    return folder


def proto_inputs(rows: int = 3, spin: int = 0, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "x": (rng.standard_normal((rows, 4)) * 100).astype(np.float32),
        "ids": rng.integers(-(2**40), 2**40, (rows, 4)),
        "h": bfloat16.to_float32(bfloat16.from_float32(rng.standard_normal((rows, 4)).astype(np.float32))),
        "spin": np.full((rows, 1), spin, np.int64),
    }


def assert_as_predict(got: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    """What the server sent is what predict returns: bit for bit, strings as UTF-8, BF16 as its values."""
    for name, value in expected.items():
        if name == "text":
            assert [s.decode() if isinstance(s, bytes) else s for s in got[name].ravel()] == list(value.ravel()), name
        else:
            assert got[name].astype(value.dtype).tobytes() == value.tobytes(), name


def assert_closed_form(got: dict[str, np.ndarray], inputs: dict[str, np.ndarray]) -> None:
    """What the server sent is what the graph computes, known without running it (predict included): y = 2x,
    ids + 1, h as float, x rounded to BF16 (ml_dtypes, round to nearest even)."""
    import ml_dtypes

    np.testing.assert_array_equal(got["y"], 2 * inputs["x"])
    np.testing.assert_array_equal(got["ids_next"], inputs["ids"] + 1)
    np.testing.assert_array_equal(got["h_float"], inputs["h"])
    rounded = inputs["x"].astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(got["x_bf16"].astype(np.float32), rounded)


def json_request(inputs: dict[str, np.ndarray]) -> bytes:
    datatypes = {"x": "FP32", "ids": "INT64", "h": "BF16", "spin": "INT64"}
    return json.dumps(
        {"inputs": [{"name": n, "shape": list(v.shape), "datatype": datatypes[n], "data": v.ravel().tolist()}
                    for n, v in inputs.items()]}
    ).encode()  # fmt: skip


def call(url: str, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    """One request on a connection of its own: (status, headers, body)."""
    connection = HTTPConnection(url, timeout=60)
    try:
        connection.request(method, path, body, headers or {})
        return answered(connection)
    finally:
        connection.close()


def answered(connection: HTTPConnection) -> tuple[int, dict[str, str], bytes]:
    response = connection.getresponse()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


def metrics(url: str) -> dict[str, float]:
    """/metrics' samples: 'name{labels}' -> value."""
    status, headers, content = call(url, "GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    samples = (line.rpartition(" ") for line in content.decode().splitlines() if line and not line.startswith("#"))
    return {name: float(value) for name, _, value in samples}


def growth(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """How much each /metrics sample grew from `before` to `after` (a sample new since counts from 0)."""
    return {name: value - before.get(name, 0) for name, value in after.items()}
