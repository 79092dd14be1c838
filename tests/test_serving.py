"""`python -m pipeline serve`: the Open Inference Protocol (KServe v2 REST) for a deploy folder, run from
the lean serving environment serving/Dockerfile installs (serving/requirements.txt plus the pipeline
with --no-deps) and driven by Triton's own HTTP client, which speaks the same protocol."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pipeline.serve import protocol, server
from pipeline.serve.predict import load
from tests.conftest import REPO
from tests.tiny_deploy import SEQ, SPECS, VOCAB, deploy_folders

http = pytest.importorskip("tritonclient.http")
utils = pytest.importorskip("tritonclient.utils")


def requirements() -> dict[str, str]:
    lines = (REPO / "serving" / "requirements.txt").read_text().splitlines()
    return dict(re.match(r"([\w.-]+)(.*)", line).groups() for line in lines if line and not line.startswith("#"))


def test_the_serving_image_pins_what_the_pipeline_pins():
    """serving/requirements.txt (the lean image) and pyproject.toml name the same versions."""
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    pinned = dict(re.match(r"([\w.-]+)(.*)", spec).groups() for spec in declared)
    lean = requirements()
    assert lean and {name: pinned.get(name) for name in lean} == lean


# --- the protocol's bodies, without a server -------------------------------------------------------


def test_json_and_binary_requests_decode_to_the_same_arrays():
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    as_json = json.dumps({"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": x.ravel().tolist()}]})
    header = json.dumps(
        {"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "parameters": {"binary_data_size": 24}}]}
    ).encode()
    from_json = protocol.decode(as_json.encode(), None, {"x": "FP32"}).inputs["x"]
    from_binary = protocol.decode(header + x.tobytes(), str(len(header)), {"x": "FP32"}).inputs["x"]
    assert from_json.tobytes() == x.tobytes() == from_binary.tobytes()


def test_a_json_response_reads_back_bit_for_bit():
    rng = np.random.default_rng(0)
    y = rng.standard_normal((3, 5)).astype(np.float32) * 1e-3
    body, headers = protocol.encode({"y": y}, protocol.InferRequest({}), "m")
    data = json.loads(body)["outputs"][0]
    assert headers["content-type"] == "application/json"
    assert np.asarray(data["data"], np.float32).reshape(data["shape"]).tobytes() == y.tobytes()


BAD_BODIES = {
    "not json": (b"{inputs", None, "not JSON"),
    "no inputs": (b'{"outputs": []}', None, "no 'inputs' list"),
    "unknown input": (b'{"inputs": [{"name": "z", "shape": [1], "datatype": "FP32", "data": [1]}]}', None, "'z'"),
    "datatype": (b'{"inputs": [{"name": "x", "shape": [1], "datatype": "INT64", "data": [1]}]}', None, "FP32"),
    "count": (b'{"inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3]}]}', None, "needs 4"),
    "shape": (b'{"inputs": [{"name": "x", "shape": [-1], "datatype": "FP32", "data": [1]}]}', None, "'shape'"),
    "outputs": (
        b'{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}], "outputs": [1]}',
        None,
        "'outputs' must be a list",
    ),
    "parameters": (
        b'{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1], "parameters": 3}]}',
        None,
        "input 'x': 'parameters' must be an object",
    ),
    "binary size": (
        b'{"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "parameters": {"binary_data_size": 4}}]}1234',
        "9999",
        "does not fit",
    ),
}


@pytest.mark.parametrize("case", BAD_BODIES)
def test_a_malformed_request_is_one_line_naming_what_is_wrong(case: str):
    body, header, expected = BAD_BODIES[case]
    with pytest.raises(protocol.BadRequest, match=re.escape(expected)) as caught:
        protocol.decode(body, header, {"x": "FP32"})
    assert "\n" not in str(caught.value)


# --- the server, from the lean environment ---------------------------------------------------------


@pytest.fixture(scope="module")
def lean_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The serving image's environment, made the way serving/Dockerfile makes it (about 20 s from a
    warm pip cache): the runtimes and the server, none of the pipeline's build dependencies."""
    venv = tmp_path_factory.mktemp("lean") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "-r", str(REPO / "serving" / "requirements.txt")], check=True)
    subprocess.run([*pip, "--no-deps", str(REPO)], check=True, cwd=venv.parent)
    found = subprocess.run([python, "-c", "import torch"], capture_output=True)
    assert found.returncode != 0, "the lean environment must not hold the pipeline's build dependencies"
    return python


@pytest.fixture(scope="module")
def servers(lean_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Path, str]]]:
    """A server per runtime's deploy folder, from the lean environment: variant -> (folder, url). Slow
    (about 25 s on 2 cores): the lean environment is made from the package index, and each server starts
    in it; every test that takes `servers` is marked slow for it."""
    started = {}
    try:
        for variant, folder in deploy_folders(tmp_path_factory.mktemp("tok")).items():
            started[variant] = (folder, server.start(folder, str(lean_python)))
        yield {variant: (folder, running.url) for variant, (folder, running) in started.items()}
    finally:
        for _, running in started.values():
            running.stop()


def tok_inputs(rows: int = 5, seq: int = SEQ, seed: int = 3) -> dict[str, np.ndarray]:
    from pipeline.core.data import generate_inputs

    return generate_inputs(SPECS, rows, seed, {"seq": seq})


def infer(url: str, inputs: dict[str, np.ndarray], binary: bool = True) -> dict[str, np.ndarray]:
    client = http.InferenceServerClient(url)
    tensors = []
    for name, value in inputs.items():
        tensor = http.InferInput(name, list(value.shape), utils.np_to_triton_dtype(value.dtype))
        tensor.set_data_from_numpy(value, binary_data=binary)
        tensors.append(tensor)
    result = client.infer("tok", tensors, outputs=[http.InferRequestedOutput("embedding", binary_data=binary)])
    return {"embedding": result.as_numpy("embedding")}


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["onnx_fp32", "openvino_fp16"])
def test_tritonclient_gets_what_predict_gets_bit_for_bit(servers, variant: str):
    """Slow: the servers fixture (a lean environment, a server per runtime)."""
    folder, url = servers[variant]
    reference = load(folder)
    for rows, seq in ((1, SEQ), (5, SEQ), (3, 11)):  # any sequence length fits the symbolic axis
        inputs = tok_inputs(rows, seq)
        expected = reference(inputs)["embedding"]
        for binary in (True, False):
            got = infer(url, inputs, binary)["embedding"]
            assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes(), (rows, seq, binary)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["onnx_fp32", "openvino_fp16"])
def test_health_and_metadata_come_from_the_model_file_and_the_manifest(servers, variant: str):
    """Slow: the servers fixture (a lean environment, a server per runtime)."""
    folder, url = servers[variant]
    client = http.InferenceServerClient(url)
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("tok")
    assert not client.is_model_ready("other")
    metadata = client.get_model_metadata("tok")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert [t["name"] for t in metadata["inputs"]] == list(manifest["inputs"])
    assert {t["name"]: t["datatype"] for t in metadata["inputs"]}["scale"] == "FP32"
    assert {t["name"]: t["shape"] for t in metadata["inputs"]}["input_ids"] == [-1, -1]
    assert metadata["outputs"] == [{"name": "embedding", "datatype": "FP32", "shape": [-1, 8]}]
    assert metadata["parameters"]["sha256"] == manifest["files"][manifest["entry"]]
    assert metadata["parameters"]["instances"].startswith("2 ")  # the benchmark's two requests in flight


def bad_cases() -> dict[str, tuple[dict[str, np.ndarray], str]]:
    good = tok_inputs()
    past = {**good, "input_ids": good["input_ids"].copy()}
    past["input_ids"][2, 1] = VOCAB
    mask = {**good, "attention_mask": good["attention_mask"].copy()}
    mask["attention_mask"][1, 0] = 3
    nan = {**good, "scale": good["scale"].copy()}
    nan["scale"][4, 0] = np.nan
    return {
        "id past the vocabulary": (past, "array 'input_ids' row 2 holds 50: token ids must lie in [0, 50)"),
        "mask value": (mask, "array 'attention_mask' row 1 holds 3: a mask holds only 0 and 1"),
        "NaN": (nan, "array 'scale' row 4 holds nan"),
        "missing input": ({k: v for k, v in good.items() if k != "scale"}, "missing array 'scale'"),
        "wrong datatype": ({**good, "input_ids": good["input_ids"].astype(np.int32)}, "datatype 'INT32'"),
        "wrong rank": ({**good, "scale": good["scale"].ravel()}, "array 'scale' has shape (5,)"),
        "seq mismatch": ({**good, "attention_mask": good["attention_mask"][:, :3]}, "dimension 'seq'"),
    }


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["onnx_fp32", "openvino_fp16"])
def test_a_bad_request_gets_400_and_one_line_and_the_server_keeps_serving(servers, variant: str):
    """Slow: the servers fixture (a lean environment, a server per runtime)."""
    folder, url = servers[variant]
    expected = load(folder)(tok_inputs())["embedding"]
    for case, (inputs, message) in bad_cases().items():
        with pytest.raises(utils.InferenceServerException) as caught:
            infer(url, inputs)
        assert caught.value.status() == "400", case
        assert message in caught.value.message() and "\n" not in caught.value.message(), case
        assert infer(url, tok_inputs())["embedding"].tobytes() == expected.tobytes(), f"after {case}"


@pytest.mark.slow
def test_an_unknown_model_or_version_is_404(servers):
    """Slow: the servers fixture (a lean environment, a server per runtime)."""
    import urllib.error
    import urllib.request

    _, url = servers["onnx_fp32"]
    for path in ("/v2/models/other", "/v2/models/tok/versions/2", "/v2/models/other/ready"):
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(f"http://{url}{path}", timeout=10)
        assert caught.value.code == 404 and "serves" in json.loads(caught.value.read())["error"]
