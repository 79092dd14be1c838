"""A TFLite file as a source: read by the LiteRT interpreter (names, shapes, quantization), exported by tf2onnx
with ONNX Runtime agreeing with the interpreter, converted by OpenVINO's TFLite front end with the spec's names,
and run as it ships by the `tflite` baseline's runtime. Through `add` and `dvc repro`: tests/test_e2e_add.py."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from pipeline.core.config import ExportConfig, ModelConfig
from pipeline.prepare.sources import load_source
from pipeline.runtimes.litert import Config, load
from tests.model_forms import write_tflite

RNG = np.random.default_rng(1)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("tflite")
    return root, {kind: write_tflite(root / "models" / kind, kind == "int8") for kind in ("float", "int8")}


def config(kind: str) -> ModelConfig:
    shape, dtype = ([1, 16, 16, 3], "float32") if kind == "float" else (["batch", 16, 16, 3], "int8")
    return ModelConfig(source="tflite", file="model.tflite", inputs={"image": {"shape": shape, "dtype": dtype}})


def rows(kind: str, n: int) -> dict[str, np.ndarray]:
    if kind == "float":
        return {"image": RNG.random((n, 16, 16, 3), dtype=np.float32)}
    return {"image": RNG.integers(-128, 128, (n, 16, 16, 3), dtype=np.int8)}


@pytest.mark.parametrize("kind", ["float", "int8"])
def test_a_tflite_file_exports_to_onnx_that_agrees_with_the_interpreter(files, kind, tmp_path):
    import onnxruntime as ort

    root, _ = files
    source = load_source(kind, config(kind), root)
    expected = ["output_0", "output_1"] if kind == "float" else ["output_0"]  # the signature's keys
    assert source.output_names == expected
    assert ("full-integer" in "".join(source.notes)) == (kind == "int8")
    assert (source.full_integer or "").startswith("a full-integer (INT8) TFLite model (image scale" if kind == "int8"
                                                  else "")  # fmt: skip
    x = rows(kind, 1 if kind == "float" else 3)
    want = source.predict(x)
    report = source.export_onnx(tmp_path / "model.onnx", ExportConfig())
    assert report["exporter"].startswith("tf2onnx") and "from_tflite" in report["exporter"]
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["image"]
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, x), strict=True))
    assert list(got) == expected
    ops = {node.op_type for node in __import__("onnx").load(str(tmp_path / "model.onnx")).graph.node}
    assert ("QuantizeLinear" in ops) == (kind == "int8")  # a full-integer model's quantization is kept
    for name in expected:
        assert got[name].dtype == want[name].dtype
        tolerance = 1 if kind == "int8" else 1e-5  # one quantization step
        assert np.abs(got[name].astype(np.float64) - want[name]).max() <= tolerance, name


def test_the_baseline_runs_the_file_as_it_ships_with_the_sources_names(files):
    root, paths = files
    session = load(paths["int8"], threads=1, config=Config(output_names=["scores"]))
    x = rows("int8", 4)
    assert session.input_names == ["image"] and session.output_names == ["scores"]
    out = session.run(x)["scores"]
    assert out.shape == (4, 4) and out.dtype == np.int8
    call = session.prepare(x)
    call()
    assert session.details()["delegate"].startswith("XNNPACK")
    sessions, how = session.request_sessions(2, 2)
    assert len({id(s) for s in sessions}) == 2 and "not thread-safe" in how
    source = load_source("int8", config("int8"), root)
    assert np.array_equal(out, source.predict(x)["output_0"])


def test_openvino_reads_the_file_itself_with_the_specs_names(files):
    from types import SimpleNamespace

    import openvino as ov

    from pipeline.optimize.passes.openvino.convert import convert, frontend_of

    root, _ = files
    ctx = SimpleNamespace(model="float", root=root, config=config("float"),
                          source_info=SimpleNamespace(output_names=["scores", "points"]))  # fmt: skip
    assert (
        frontend_of("tflite", "auto") == "source"
        and frontend_of("onnx", "auto") == frontend_of("tflite", "onnx") == "onnx"
    )
    model = convert(ctx, "auto")
    assert [p.get_any_name() for p in model.inputs] == ["image"]
    assert sorted(p.get_any_name() for p in model.outputs) == ["points", "scores"]
    x = rows("float", 1)
    got = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})(x)
    want = load_source("float", config("float"), root).predict(x)
    renamed = dict(zip(["scores", "points"], want.values(), strict=True))  # the source's outputs, in order
    for port, value in got.items():
        assert np.allclose(value, renamed[port.get_any_name()], atol=1e-5), port.get_any_name()


def test_openvino_variants_are_built_from_the_file_where_the_onnx_export_failed(tiny_project):
    """tf2onnx cannot convert every .tflite file (a stateful wake-word model: 'list index out of range'): the
    export record then says failed, and the variants that start from the export fail with its reason, while
    OpenVINO's, which read the file itself, are built."""
    import json

    from pipeline.core import layout
    from pipeline.core.config import Params
    from pipeline.optimize.stage import build_variant
    from pipeline.prepare.export import export_model

    write_tflite(tiny_project / "models" / "tfl")
    params = Params.model_validate({"models": ["tfl"], "catalog": {"tfl": config("float").model_dump()},
                                    "variants": {"onnx_fp32": {}, "openvino_fp32": {}}})  # fmt: skip
    (tiny_project / "params.yaml").write_text(yaml.safe_dump(params.model_dump(mode="json", exclude_defaults=True)))
    assert export_model("tfl", params, tiny_project)["status"] == "ok"
    record = layout.source_dir("tfl", tiny_project) / layout.SOURCE_INFO
    saved = json.loads(record.read_text())
    saved["export"] |= {"status": "failed", "reason": "ONNX export failed: tf2onnx could not convert it"}
    record.write_text(json.dumps(saved))
    onnx = build_variant("tfl", "onnx_fp32", params, tiny_project)
    assert onnx.status == "failed" and onnx.reason == "no ONNX export: ONNX export failed: tf2onnx could not convert it"
    openvino = build_variant("tfl", "openvino_fp32", params, tiny_project)
    assert openvino.status == "ok", openvino.reason
    assert openvino.build.model_dump()["frontend"] == "source"


def test_an_int8_variant_of_a_full_integer_source_is_not_built_and_says_why():
    """Its quantization is kept by the export and by OpenVINO's reading of the file: an INT8 pass would only
    quantize INT8 again; the float variants are built (they run the INT8 graph as it is)."""
    from types import SimpleNamespace

    from pipeline.core.registry import VARIANTS
    from pipeline.optimize.applicability import already_integer

    integer = SimpleNamespace(export=SimpleNamespace(full_integer="a full-integer (INT8) TFLite model (x scale 0.5)"))
    skipped = {name for name, v in VARIANTS.items() if already_integer(v, "m", integer)}
    assert skipped == {name for name, v in VARIANTS.items() if v.precision in ("int8", "int4")}
    reason = already_integer(VARIANTS["openvino_int8"], "m", integer).reason
    assert reason.startswith("m is already a full-integer (INT8) TFLite model (x scale 0.5): the float variants run")
    assert (
        already_integer(VARIANTS["openvino_int8"], "m", SimpleNamespace(export=SimpleNamespace(full_integer=None)))
        is None
    )
