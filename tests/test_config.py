"""params.yaml validation: every mistake ends in one line naming the file and the field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.core.config import load_params
from pipeline.core.errors import ConfigError
from pipeline.optimize.knobs import check_variant_params, validate_variant_params
from pipeline.optimize.variant_lists import check_variant_lists
from tests.conftest import REPO


def write_params(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load((REPO / "params.yaml").read_text())
    edit(data)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_dvc_reads_the_repository_params():
    """DVC parses params.yaml with its own YAML 1.2 reader, stricter than PyYAML (an unquoted
    `cuda:0` in a flow list passes PyYAML and breaks every `dvc repro`)."""
    from dvc.utils.serialize import parse_yaml

    parsed = parse_yaml((REPO / "params.yaml").read_text(), "params.yaml")
    assert parsed == yaml.safe_load((REPO / "params.yaml").read_text())


def test_repository_params_are_valid():
    params = load_params(REPO / "params.yaml")
    assert params.models and set(params.models) <= set(params.catalog)
    assert params.bench.resolved_threads() >= 1


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda d: d["machine_variants"].update(onnx_fp32={}),
            "machine_variants.onnx_fp32: also listed under 'variants'",
        ),
        (
            lambda d: d.update(gpu_variants={"onnx_cuda_fp32": {}}),
            'gpu_variants: GPU variants need a cuda target: add "cuda:0" to targets',
        ),
        (lambda d: d["models"].append("nope"), "models.6: 'nope' has no entry under 'catalog'"),
        (
            lambda d: d["catalog"]["resnet50"]["inputs"]["image"].update(shape=["batch", 3, "side", "side"]),
            "catalog.resnet50.dims.side: symbolic dimension 'side' needs a value",
        ),
        (
            lambda d: d["catalog"]["resnet50"].update(dims={"seq": 8}),
            "catalog.resnet50.dims.seq: no input has a dimension named 'seq'",
        ),
        (
            lambda d: d["catalog"]["resnet50"]["inputs"]["image"].update(kind="token_ids"),
            "catalog.resnet50.inputs.image.kind: token_ids inputs are integers; dtype float32 does not fit",
        ),
        (
            lambda d: d["catalog"]["spam_fnn"].update(make_batch_dynamic=True),
            "catalog.spam_fnn.make_batch_dynamic: applies to ONNX files whose inputs fix the batch axis",
        ),
        (
            lambda d: d["catalog"]["resnet50"]["inputs"].update(extra={"shape": [2, 5]}),
            "(all inputs share one batch axis)",
        ),
        (
            lambda d: d["catalog"]["digits_cnn"]["inputs"]["image"].update(shape=["batch", 1, -8, 8]),
            "catalog.digits_cnn.inputs.image.shape: dimensions must be positive integers or symbol names",
        ),
        (lambda d: d["catalog"]["spam_fnn"].pop("factory"), "catalog.spam_fnn.factory: torch models need 'factory"),
        (
            lambda d: d["catalog"]["spam_fnn"].update(factory="no colon"),
            "catalog.spam_fnn.factory: expected 'module:function'",
        ),
        (lambda d: d["bench"].update(threads=0), "bench.threads: threads must be a positive integer or 'auto'"),
        (lambda d: d["bench"]["throughput"].update(batches=[]), "bench.throughput.batches:"),
        (lambda d: d["catalog"].update({"bad-name": d["catalog"]["spam_fnn"]}), "may use only letters, digits and '_'"),
        (lambda d: d["catalog"]["spam_fnn"].update(source="caffe"), "catalog.spam_fnn.source: Input should be"),
        (
            lambda d: d["catalog"]["spam_fnn"].update(source="onnx", file=None),
            "catalog.spam_fnn.file: onnx models need",
        ),
        (
            lambda d: d["catalog"]["spam_fnn"].update(overrides={"onnx_fp64": {}}),
            "catalog.spam_fnn.overrides.onnx_fp64: not a configured variant",
        ),
        (
            lambda d: d["select"]["constraints"].update(min_cosine=1.5),
            "select.constraints.min_cosine: Input should be less than or equal to 1",
        ),
        (
            lambda d: d["select"]["constraints"].update(min_cosine=0),
            "select.constraints.min_cosine: Input should be greater than 0",
        ),
        (
            lambda d: d["catalog"]["minilm_l6"].update(model_type="transformr"),
            "catalog.minilm_l6.model_type: Input should be 'auto', 'transformer', 'cnn' or 'other'",
        ),
        (
            lambda d: d["catalog"]["digits_keras"].update(torch_exporter="torchscript"),
            "catalog.digits_keras.torch_exporter: applies to torch models",
        ),
        (lambda d: d["export"].update(split={"calibration": 0.6}), "export.split.calibration: Input should be less"),
        (
            lambda d: d["select"]["constraints"].update(devices=["gpu"]),
            "select.constraints.devices.0: unknown target 'gpu' (known: cpu, cuda, cuda:N)",
        ),
    ],
)
def test_mistakes_name_file_and_field(tmp_path, edit, expected):
    path = write_params(tmp_path, edit)
    with pytest.raises(ConfigError) as error:
        load_params(path)
    message = str(error.value)
    assert message.startswith(f"{path}: "), message
    assert expected in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d["variants"].update(onnx_fp64={}), "variants.onnx_fp64: unknown variant (known: onnx_fp32"),
        (
            lambda d: d["variants"].update(torch_compile=d["machine_variants"].pop("torch_compile")),
            "variants.torch_compile: its artifact depends on the machine that builds it",
        ),
        (
            lambda d: d.update(targets=["cpu", "cuda:0"]) or d["machine_variants"].update(onnx_cuda_fp32={}),
            "machine_variants.onnx_cuda_fp32: a GPU variant: list it under gpu_variants",
        ),
        (
            lambda d: (
                d.update(targets=["cpu", "cuda:0"], gpu_variants={"onnx_opt": {}}) or d["variants"].pop("onnx_opt")
            ),
            "gpu_variants.onnx_opt: runs on cpu: list it elsewhere",
        ),
        (
            lambda d: d["catalog"]["spam_fnn"].update(skip=["onnx_int4"]),
            "catalog.spam_fnn.skip.0: 'onnx_int4' is not a variant",
        ),
        (
            lambda d: d["select"]["constraints"].update(runtimes=["onnxruntme"]),
            "select.constraints.runtimes.0: 'onnxruntme' is not a runtime (known: onnxruntime, ",
        ),
        (
            lambda d: d["select"].update(models={"spam_fnn": {"runtimes": ["openvino", "tflite"]}}),
            "select.models.spam_fnn.runtimes.1: 'tflite' is not a runtime (known: onnxruntime, ",
        ),
    ],
)
def test_mistakes_against_the_registry_name_file_and_field(tmp_path, edit, expected):
    """What needs the registry's tables is checked by the build layer (python -m pipeline check, stages,
    the plan stage): the schema reads no table, so an edit to the registry retrains nothing."""
    path = write_params(tmp_path, edit)
    params = load_params(path)
    with pytest.raises(ConfigError) as error:
        check_variant_lists(params, str(path))
    message = str(error.value)
    assert message.startswith(f"{path}: "), message
    assert expected in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda d: d["machine_variants"]["onnx_int8_static"].update(calibration_method="mean"),
            "machine_variants.onnx_int8_static.calibration_method: Input should be",
        ),
        (
            lambda d: d["machine_variants"]["onnx_int8_dynamic"].update(per_chanel=True),
            "machine_variants.onnx_int8_dynamic.per_chanel: unknown key",
        ),
        (
            lambda d: d["catalog"]["spam_fnn"].update(overrides={"onnx_int8_static": {"per_chanel": False}}),
            "catalog.spam_fnn.overrides.onnx_int8_static.per_chanel: unknown key",
        ),
        (
            lambda d: d["variants"]["openvino_int8"].update(ignored_scope={"name": ["x"]}),
            "variants.openvino_int8.ignored_scope.name: unknown key",
        ),
    ],
)
def test_knob_mistakes_are_caught_by_the_pass_and_name_file_and_field(tmp_path, edit, expected):
    """A variant's knobs belong to its pass (its Config): params.yaml reads without importing a pass,
    and the build layer's check (python -m pipeline check, the plan and build stages) names the field."""
    path = write_params(tmp_path, edit)
    params = load_params(path)
    with pytest.raises(ConfigError) as error:
        check_variant_params(params, str(path))
    message = str(error.value)
    assert message.startswith(f"{path}: "), message
    assert expected in message
    assert "\n" not in message


def test_reading_params_imports_no_pass_runtime_or_registry():
    code = (
        "import sys; from pipeline.core.config import load_params; load_params('params.yaml'); "
        "print(sorted(m for m in sys.modules if m.startswith(('pipeline.optimize', 'pipeline.runtimes')) "
        "or m == 'pipeline.core.registry'))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_yaml_syntax_error_gives_line(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("models: [a\ncatalog: {}\n")
    with pytest.raises(ConfigError, match=r"params.yaml: line \d+, column \d+: not valid YAML"):
        load_params(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_params(tmp_path / "params.yaml")


def test_model_overrides_apply_over_the_variant_section():
    params = load_params(REPO / "params.yaml")
    assert params.variant_params("onnx_int8_static")["op_types"] is None  # the recipe decides
    assert params.variant_params("onnx_int8_static", "digits_jax")["op_types"] == ["Conv"]
    assert params.variant_params("onnx_int8_static", "digits_jax")["calibration_method"] == "minmax"


def test_variant_params_are_parsed_by_their_pass():
    config = validate_variant_params("onnx_int8_static", {"calibration_samples": 10})
    assert config.calibration_samples == 10 and config.format == "qdq"


def test_select_variants_must_name_configured_variants(tmp_path):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["select"]["models"] = {"spam_fnn": {"variants": ["onnx_optt"]}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(ConfigError, match=r"select.models.spam_fnn.variants: no such variant\(s\) \['onnx_optt'\]"):
        load_params(path)
