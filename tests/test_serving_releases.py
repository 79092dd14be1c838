"""Each repository is written for an engine release (pipeline/core/engine_versions.yaml) and the artifact is
first run by that release's own runtime version, in a cached environment pip makes (skipped, with pip's
line, where the package index cannot be reached): a release that reads it and answers as `predict` does
is named in the written files, with its latency beside this pipeline's runtime; one that cannot read it, or
answers otherwise, gets no folder and one line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import yaml
from onnx import TensorProto, helper, numpy_helper

from pipeline.core import engines
from pipeline.core.config import ServingConfig, load_params
from pipeline.core.errors import ConfigError, Unavailable
from pipeline.core.files import sha256
from pipeline.core.records import manifest as manifest_record
from pipeline.serve.repositories.write import write_serving
from pipeline.serve.runtime_env import runtime_python
from pipeline.serve.side_by_side import MIN_ROUNDS, side_by_side
from tests.conftest import REPO
from tests.test_serving_repos import MODEL, deploy

UNTIMED = {"compare_seconds": 0}  # the release's latency is timed in one test only (below)


def release_runtimes(*releases: engines.Release) -> None:
    """Make (or find) each release's runtime environments. Where pip cannot, the test is skipped only when
    the package index cannot be reached (this machine's limit); a pin the index does not have (a typo in
    pipeline/core/engine_versions.yaml) fails it, naming the pin."""
    for release in releases:
        for package in ("onnxruntime", "openvino"):
            if version := getattr(release, package):
                try:
                    runtime_python(package, version)
                except Unavailable as error:
                    listed = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package],
                                            capture_output=True, text=True, timeout=120)  # fmt: skip
                    if listed.returncode != 0:
                        pytest.skip(f"{error} (the package index cannot be reached: {listed.stderr.strip()[-200:]})")
                    pytest.fail(f"{package}=={version} (pipeline/core/engine_versions.yaml, {release}): {error}")


def with_model(folder: Path, model: onnx.ModelProto) -> Path:
    """The deploy folder with `model` as its model.onnx, the manifest's sha256 made to match."""
    onnx.save(model, str(folder / "model.onnx"))
    manifest = manifest_record.load(folder)
    manifest_record.write(manifest.model_copy(update={"files": {"model.onnx": sha256(folder / "model.onnx")}}), folder)
    return folder


def readme(folder: Path) -> str:
    return (folder / "serving" / "README.md").read_text()


def test_the_table_names_each_releases_runtimes_and_the_newest_is_the_default():
    triton, ovms = engines.releases("triton"), engines.releases("ovms")
    assert (triton["25.08"].onnxruntime, triton["25.08"].openvino) == ("1.23.0", "2025.2.0")  # build.py, v2.60.0
    assert engines.release("triton", None) == list(triton.values())[-1]
    assert engines.release("ovms", None) == list(ovms.values())[-1] and ovms["2026.1"].onnxruntime is None
    versions = [v for r in (*triton.values(), *ovms.values()) for v in (r.onnxruntime, r.openvino) if v]
    assert all(re.fullmatch(r"\d{1,4}\.\d+\.\d+", v) for v in versions), versions


def test_an_unknown_release_is_one_error_naming_the_field(tmp_path: Path):
    params = yaml.safe_load((REPO / "params.yaml").read_text()) | {"serving": {"triton": "24.01"}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))

    with pytest.raises(ConfigError, match=r"params.yaml: serving.triton: triton release '24.01' is not in engine_"):
        load_params(tmp_path / "params.yaml")


def test_a_release_that_reads_the_artifact_is_named_in_the_files_with_what_it_answered_and_its_latency(
    tmp_path: Path,
):
    """Each release runs another runtime version than this pipeline's: the artifact is timed in both, in
    alternating blocks, and the written files give both figures."""
    config = ServingConfig(triton="26.07", ovms="2026.1", compare_seconds=0.5)
    release_runtimes(engines.release("triton", "26.07"), engines.release("ovms", "2026.1"))
    folder = deploy(tmp_path)

    report = write_serving(folder, config)

    assert [r.engine for r in report.engines if r.written] == ["triton", "ovms", "kserve"]
    header = (folder / "serving" / "triton" / MODEL / "config.pbtxt").read_text()
    assert "# Triton 26.07 runs onnxruntime 1.27.0: loads; outputs match predict's on 64 generated rows" in header
    provenance = json.loads((folder / "serving" / "ovms" / "provenance.json").read_text())
    assert provenance["checked_with"].startswith("OVMS 2026.1 runs openvino 2026.1.0: loads; outputs match")
    triton_latency, ovms_latency = report.engines[0].latency, report.engines[1].latency
    assert triton_latency and ovms_latency, report.lines()
    assert (triton_latency["release_version"], triton_latency["pipeline_version"]) == ("1.27.0", ort.__version__)
    assert (ovms_latency["release_version"], ovms_latency["runtime"]) == ("2026.1.0", "openvino")
    for latency in (triton_latency, ovms_latency):  # a tiny MatMul: microseconds in any runtime version
        assert 1e-4 < latency["release_p50_ms"] < 5 and 1e-4 < latency["pipeline_p50_ms"] < 5, latency
        assert 0.1 < latency["ratio"] < 10, latency  # two versions of one runtime on one graph: not 10x apart
    # the files carry the figures measured, not others
    timed = r"batch-1 p50 (\S+) ms there against (\S+) ms on onnxruntime \S+ \(this pipeline's\), x([\d.]+) "
    release_ms, pipeline_ms, ratio = map(float, re.search(timed, header).groups())
    assert (release_ms, pipeline_ms) == (float(f"{triton_latency['release_p50_ms']:.3g}"),
                                         float(f"{triton_latency['pipeline_p50_ms']:.3g}"))  # fmt: skip
    assert ratio == round(triton_latency["ratio"], 2)
    assert f"{ovms_latency['pipeline_p50_ms']:.3g} ms on openvino" in readme(folder)


STUB = """import json, sys
name, ms = {name!r}, {ms!r}
print(json.dumps({{"version": name}}), flush=True)
for line in sys.stdin:
    with open({log!r}, "a") as log:
        log.write(name + "\\n")
    print(json.dumps({{"ms": ms}}), flush=True)
"""


def stub_python(folder: Path, name: str, ms: list[float]) -> Path:
    """An executable that answers side_by_side's protocol (pipeline/serve/in_runtime.py `time`) with block
    times the test chooses, and logs each block it was asked for."""
    stub = folder / f"{name}-python"
    stub.write_text(f"#!{sys.executable}\n" + STUB.format(name=name, ms=ms, log=str(folder / "blocks.log")))
    stub.chmod(0o755)
    return stub


def test_side_by_side_reports_each_sides_own_times_and_their_ratio_release_over_pipeline(tmp_path, monkeypatch):
    """Both sides stubbed with known block times (the release 3x slower in every block): the figures are the
    stubs', the ratio is release / pipeline, and the blocks alternate in turned order (AB, BA, ...); a ratio known
    within ±PRECISE_PCT ends the timing after MIN_ROUNDS, though `seconds` allowed a minute."""
    release = stub_python(tmp_path, "release", [6.0, 6.0, 9.0])
    monkeypatch.setattr(sys, "executable", str(stub_python(tmp_path, "pipeline", [2.0, 2.0, 3.0])))

    timed = side_by_side(release, "onnxruntime", tmp_path / "model.onnx", {"x": np.zeros(1)}, {}, 1, seconds=60)

    assert (timed.release_version, timed.pipeline_version) == ("release", "pipeline")
    assert (timed.release_ms, timed.pipeline_ms) == (6.0, 2.0)
    assert [timed.ratio.center, timed.ratio.low, timed.ratio.high] == pytest.approx([3.0, 3.0, 3.0])
    blocks = (tmp_path / "blocks.log").read_text().split()
    assert timed.ratio.blocks == MIN_ROUNDS and len(blocks) == 2 * MIN_ROUNDS
    assert blocks[:4] == ["release", "pipeline", "pipeline", "release"]
    assert (
        "batch-1 p50 6 ms there against 2 ms on onnxruntime pipeline (this pipeline's), x3.00 (3.00-3.00" in timed.text
    )


def test_a_release_that_cannot_read_the_opset_gets_it_converted_and_checked_again(tmp_path: Path):
    """Opset 24 (IR 12), which ONNX Runtime 1.31 reads and Triton 25.08's 1.23.0 does not: onnx's version
    converter takes it to opset 23 for Triton; the deploy folder keeps the file that was measured."""
    release_runtimes(engines.release("triton", "25.08"))
    folder = deploy(tmp_path)
    model = onnx.load(str(folder / "model.onnx"))
    model.opset_import[0].version, model.ir_version = 24, 12  # MatMul and Add are the same in opset 24
    with_model(folder, model)

    report = write_serving(folder, ServingConfig(triton="25.08", **UNTIMED))

    assert report.engines[0].written, report.engines[0].reason
    header = (folder / "serving" / "triton" / MODEL / "config.pbtxt").read_text()
    assert "# Triton 25.08 runs onnxruntime 1.23.0: loads; outputs match predict's" in header
    assert "converted: model.onnx from opset 24 (IR 12) to opset 23 (IR 11) by onnx.version_converter" in header
    served = onnx.load(str(folder / "serving" / "triton" / MODEL / "1" / "model.onnx"))
    assert (served.opset_import[0].version, served.ir_version) == (23, 11)
    assert f"# sha256 1/model.onnx {sha256(folder / 'serving' / 'triton' / MODEL / '1' / 'model.onnx')}" in header
    assert onnx.load(str(folder / "model.onnx")).opset_import[0].version == 24


def test_a_release_that_cannot_read_it_even_converted_gets_no_folder_and_says_why(tmp_path: Path):
    """Swish, new in opset 24: onnx's converter has no older form of it."""
    release_runtimes(engines.release("triton", "25.08"))
    folder = deploy(tmp_path)
    graph = helper.make_graph(
        [helper.make_node("Swish", ["x"], ["output"])], "swish",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 12])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 12])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    model.ir_version = 12
    with_model(folder, model)

    report = write_serving(folder, ServingConfig(triton="25.08", **UNTIMED))

    assert not (folder / "serving" / "triton").exists()
    assert "- triton: cannot serve tiny_net as is: Triton 25.08 runs onnxruntime 1.23.0: cannot load model.onnx" in (
        readme(folder)
    )
    assert report.engines[0].reason.startswith("Triton 25.08 runs onnxruntime 1.23.0: cannot load model.onnx")


def test_an_engine_whose_runtime_answers_otherwise_gets_no_folder_and_says_by_how_much(tmp_path: Path):
    """ONNX Runtime's FusedGemm (what its graph optimizer fuses a Gemm and its activation into) read by
    OpenVINO, OVMS's engine, which applies a Relu whatever the activation says: the Sigmoid is lost."""
    release_runtimes(engines.release("triton", None), engines.release("ovms", None))
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((3, 12)).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b")]  # fmt: skip
    fused = helper.make_node("FusedGemm", ["x", "w", "b"], ["output"], domain="com.microsoft", activation="Sigmoid",
                             alpha=1.0, beta=1.0, transB=1)  # fmt: skip
    graph = helper.make_graph(
        [fused], "fused", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 12])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 3])], weights,
    )  # fmt: skip
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    model.ir_version = 9
    folder = with_model(deploy(tmp_path), model)

    report = write_serving(folder, ServingConfig(**UNTIMED))

    assert [r.engine for r in report.engines if r.written] == ["triton", "kserve"]  # ONNX Runtime runs it as measured
    assert re.search(r"- ovms: cannot serve tiny_net as is: OVMS \S+ runs openvino \S+: loads, but outputs differ from "
                     r"predict's on 64 generated rows \(largest difference [\d.]+ ", readme(folder))  # fmt: skip
    assert not (folder / "serving" / "ovms").exists() and not (folder / "serving" / "kserve" / "ovms.yaml").exists()


def test_an_output_whose_openvino_port_has_other_names_too_is_compared_by_its_own(tmp_path: Path):
    """The graph's output behind an Identity of a Cast, as onnxruntime's float16 tool writes `onnx_fp16`:
    OpenVINO fuses them, and the port's first name is the Cast's, not the output's."""
    release_runtimes(engines.release("ovms", None))
    weights = [numpy_helper.from_array(np.ones((12, 3), np.float16), "w")]
    nodes = [
        helper.make_node("Cast", ["x"], ["x16"], to=TensorProto.FLOAT16),
        helper.make_node("MatMul", ["x16", "w"], ["h16"]),
        helper.make_node("Cast", ["h16"], ["graph_output_cast_0"], to=TensorProto.FLOAT),
        helper.make_node("Identity", ["graph_output_cast_0"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes, "cast_back", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 12])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 3])], weights,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    folder = with_model(deploy(tmp_path), model)

    report = write_serving(folder, ServingConfig(**UNTIMED))

    assert report.engines[1].written, report.engines[1].reason
    provenance = json.loads((folder / "serving" / "ovms" / "provenance.json").read_text())
    assert "loads; outputs match predict's" in provenance["checked_with"]


def test_a_state_input_whose_batch_axis_is_not_the_first_is_checked_from_the_pipelines_rows(tmp_path: Path):
    """The deploy step hands over the model's reference rows rows first (the pipeline's layout); a state
    [2, batch, 4] (Silero VAD's) goes back to the model's layout before the checks and the release's run."""
    release_runtimes(engines.release("triton", None))
    weights = [numpy_helper.from_array(np.ones((12, 3), np.float32), "w")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["output"]), helper.make_node("Neg", ["state"], ["state_out"])]
    graph = helper.make_graph(
        nodes, "stateful",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 12]),
         helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, "batch", 4])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("state_out", TensorProto.FLOAT, [2, "batch", 4])], weights,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    inputs = {"x": {"shape": ["batch", 12]}, "state": {"shape": [2, "batch", 4], "batch_axis": 1}}
    layout = {"layout": {"inputs": inputs, "outputs": {"state_out": 1}}}  # as the build records a state model's
    fields = {"inputs": inputs, "outputs": ["output", "state_out"], "runtime_config": layout}
    folder = with_model(deploy(tmp_path, **fields), model)
    rng = np.random.default_rng(0)
    rows = {"x": rng.standard_normal((5, 12), np.float32), "state": rng.standard_normal((5, 2, 4), np.float32)}

    report = write_serving(folder, ServingConfig(**UNTIMED), rows)

    assert report.engines[0].written, report.engines[0].reason
    assert "outputs match predict's on 5 reference rows" in report.engines[0].checked


def test_a_graph_holding_onnxruntime_extensions_operators_is_served_by_no_engine_here_and_says_why(tmp_path: Path):
    """Triton's onnxruntime backend loads custom operators only from a library path on the server
    (model_operations.op_library_filename) and OVMS reads none: each engine is named with that reason."""
    folder = deploy(tmp_path)
    io = [helper.make_tensor_value_info(n, TensorProto.STRING, ["batch"]) for n in ("text", "out")]
    node = helper.make_node("StringRegexReplace", ["text"], ["out"], domain="ai.onnx.contrib", pattern="a", rewrite="b")
    graph = helper.make_graph([node], "g", io[:1], io[1:])
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.contrib", 1)]
    with_model(folder, helper.make_model(graph, opset_imports=opsets, ir_version=10))

    report = write_serving(folder, ServingConfig())

    assert not [r for r in report.engines if r.written]
    assert all("onnxruntime-extensions' operators (StringRegexReplace)" in r.reason for r in report.engines)
