"""TensorFlow/Keras and JAX sources, their conversion to ONNX, the XLA variants and their runtimes,
on tiny models built here; plus the torch_compile and torch_xla variants."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pipeline import runtimes
from pipeline.core import layout
from pipeline.core.config import ModelConfig, Params
from pipeline.core.data import DataSet
from pipeline.core.errors import ConfigError, ModelFileError, NotApplicable, PipelineError
from pipeline.optimize.passes.base import BuildContext
from pipeline.prepare.export import export_model
from pipeline.prepare.sources import load_source
from tests.conftest import build, models_from, tiny_config, torch_build_context

X = {"x": np.random.default_rng(0).standard_normal((6, 12)).astype(np.float32)}

TINY_JAX = textwrap.dedent(
    """
    import jax
    import jax.numpy as jnp


    def apply(params, x):
        return jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"]


    def build(seed=0, hidden=16):
        k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
        params = {"w1": jax.random.normal(k1, (12, hidden)) * 0.3, "b1": jnp.zeros(hidden),
                  "w2": jax.random.normal(k2, (hidden, 3)) * 0.3}
        return apply, params
    """
)


def keras_model():
    import keras

    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [keras.Input((12,), name="x"), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)]
    )


@pytest.fixture(scope="module")
def exported_once(tmp_path_factory):
    """models/tiny_keras (.keras file), models/tiny_sm (SavedModel), models/tiny_jax (code + params), with
    tiny_keras and tiny_jax through the real export stage once: two tests read each export (an export is
    two processes that import TensorFlow or JAX, about 8 s)."""
    from pipeline.prepare.sources.jaxfn import save_params
    from pipeline.prepare.sources.tfkeras import KerasSource

    root = tmp_path_factory.mktemp("tf_jax")
    (root / "models").mkdir()
    (root / "models" / "__init__.py").touch()
    for name in ("tiny_keras", "tiny_sm", "tiny_jax"):
        (root / "models" / name).mkdir()
    keras_model().save(root / "models/tiny_keras/model.keras")
    (root / "models/tiny_jax/net.py").write_text(TINY_JAX)
    with pytest.MonkeyPatch.context() as patch, models_from(root):
        patch.chdir(root)
        source = KerasSource("tiny_keras", keras_config(), root)
        source.serving_module(jit=False).save(root / "models/tiny_sm/saved_model")
        from models.tiny_jax.net import build as build_jax

        save_params(build_jax(seed=1)[1], root / "models/tiny_jax/params.msgpack")
        for name, config in (("tiny_keras", keras_config()), ("tiny_jax", jax_config())):
            export_model(name, params_for(name, config), root)
    return root


@pytest.fixture
def project(exported_once, tmp_path, monkeypatch):
    """A copy of exported_once's folder, the working directory; imports of models.* resolve inside it."""
    root = shutil.copytree(exported_once, tmp_path / "project")
    monkeypatch.chdir(root)
    with models_from(root):
        yield root


def keras_config(**overrides):
    return tiny_config(**({"source": "keras", "factory": None, "file": "model.keras", "eval_data": None,
                           "outputs": ["scores"]} | overrides))  # fmt: skip


def sm_config(**overrides):
    return keras_config(**({"source": "savedmodel", "file": "saved_model"} | overrides))


def jax_config(**overrides):
    return tiny_config(**({"source": "jax", "factory": "models.tiny_jax.net:build", "file": "params.msgpack",
                           "eval_data": None} | overrides))  # fmt: skip


def params_for(name: str, config) -> Params:
    return Params.model_validate(
        {"models": [name], "catalog": {name: config.model_dump()}, "variants": {"onnx_fp32": {}}}
    )


def exported(root: Path, name: str, config) -> BuildContext:
    """A build context on the export stage's output, once its report says it went through with parity."""
    report = json.loads(layout.export_report(name, root).read_text())
    assert report["status"] == "ok", report["reason"]
    assert report["parity"] == "ok" and report["parity_max_abs_diff"] < 1e-4
    out = root / "out" / name
    out.mkdir(parents=True)
    return BuildContext(name, config, root, out)


def export(root: Path, name: str, config) -> BuildContext:
    """Run the real export stage, then a build context on its output."""
    export_model(name, params_for(name, config), root)
    return exported(root, name, config)


def test_keras_file_source_predicts_and_exports(project):
    source = load_source("tiny_keras", keras_config(), project)
    np.testing.assert_allclose(source.predict(X)["scores"], keras_model()(X["x"]).numpy(), atol=1e-6)
    ctx = exported(project, "tiny_keras", keras_config())
    report = layout.export_report("tiny_keras", project)
    assert "tf2onnx" in report.read_text()
    session = runtimes.load("onnxruntime", ctx.exported_onnx, 1)
    assert session.output_names == ["scores"]  # tf2onnx's 'Identity:0' renamed


def test_keras_factory_without_weights_is_seeded(project):
    (project / "models/tiny_keras/net.py").write_text(
        "import keras\n\ndef build():\n    return keras.Sequential([keras.Input((12,)), keras.layers.Dense(3)])\n"
    )
    config = keras_config(file=None, factory="models.tiny_keras.net:build", init_seed=7)
    first = load_source("tiny_keras", config, project).predict(X)["scores"]
    np.testing.assert_array_equal(first, load_source("tiny_keras", config, project).predict(X)["scores"])


def test_keras_errors_name_file_and_field(project):
    (project / "models/tiny_keras/bad.keras").write_bytes(b"garbage")
    with pytest.raises(
        ModelFileError, match=r"bad.keras: not a readable Keras model \(params.yaml: catalog.tiny_keras"
    ):
        load_source("tiny_keras", keras_config(file="bad.keras"), project)
    with pytest.raises(ConfigError, match=r"catalog.tiny_keras.inputs: the model rejects inputs x\(2, 5\)"):
        load_source("tiny_keras", keras_config(inputs={"x": {"shape": ["batch", 5]}}), project)


def test_savedmodel_source(project):
    source = load_source("tiny_sm", sm_config(), project)
    np.testing.assert_allclose(source.predict(X)["scores"], keras_model()(X["x"]).numpy(), atol=1e-6)
    export(project, "tiny_sm", sm_config())
    with pytest.raises(ConfigError, match=r"catalog.tiny_sm.inputs: names \['image'\] do not match the signature"):
        load_source("tiny_sm", sm_config(inputs={"image": {"shape": ["batch", 12]}}), project)


def test_jax_source_loads_params_and_exports(project):
    from models.tiny_jax.net import build as build_jax

    apply, params = build_jax(seed=1)
    source = load_source("tiny_jax", jax_config(), project)
    np.testing.assert_allclose(source.predict(X)["output"], np.asarray(apply(params, X["x"])), atol=1e-6)
    report = json.loads(layout.export_report("tiny_jax", project).read_text())  # exported_once's
    assert report["status"] == "ok" and report["exporter"].startswith("jax2onnx")


def test_jax_params_that_do_not_fit(project):
    with pytest.raises(ModelFileError, match=r"params.msgpack: parameter shapes differ from the factory's"):
        load_source("tiny_jax", jax_config(factory_args={"hidden": 8}), project)


def test_tf_graph_and_xla_savedmodels(project):
    ctx = exported(project, "tiny_keras", keras_config())
    expected = keras_model()(X["x"]).numpy()
    for variant, jit in (("tf_graph", False), ("tf_xla", True)):
        out = project / "out" / variant
        out.mkdir()
        result = build(BuildContext("tiny_keras", ctx.config, project, out), variant)
        assert result.details == {"jit_compile": jit, "xla_marked": jit}
        session = runtimes.load("tensorflow", out / result.entry, 1, result.runtime_config)
        np.testing.assert_allclose(session.run(X)["scores"], expected, atol=1e-5)
        assert session.details()["xla_compiled_at_load"] is jit


def test_jax_jit_and_exported_artifact(project):
    ctx = exported(project, "tiny_jax", jax_config())
    reference = DataSet.load(ctx.source_dir / layout.REFERENCE)
    for variant in ("jax_jit", "jax_xla"):
        out = project / "out" / variant
        out.mkdir()
        result = build(BuildContext("tiny_jax", ctx.config, project, out), variant)
        session = runtimes.load("jax", out / result.entry, 1, result.runtime_config)
        np.testing.assert_allclose(session.run(reference.inputs)["output"], reference.outputs["output"], atol=1e-5)
        assert session.prepare({"x": reference.inputs["x"][:1]})().shape == (1, 3)
    (project / "models/tiny_jax/net.py").unlink()  # the exported artifact needs no model code
    session = runtimes.load("jax", project / "out/jax_xla" / result.entry, 1, result.runtime_config)
    assert session.run(X)["output"].shape == (6, 3)


def test_torch_xla_is_skipped_only_when_torchax_is_not_installed(tiny_project):
    ctx = torch_build_context(tiny_project)
    if importlib.util.find_spec("torchax") is None:
        with pytest.raises(NotApplicable, match="torchax is not installed"):
            build(ctx, "torch_xla")
    else:
        assert build(ctx, "torch_xla").details["kind"] == "export"  # any crash fails this test


def test_torch_xla_fails_when_torchax_is_there_but_crashes(tiny_project, monkeypatch):
    broken = tiny_project / "broken_packages" / "torchax"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise AttributeError('module torch has no attribute _C._xla')\n")
    monkeypatch.syspath_prepend(str(broken.parent))
    monkeypatch.delitem(sys.modules, "torchax", raising=False)
    with pytest.raises(PipelineError, match=r"torchax does not import .*AttributeError") as raised:
        build(torch_build_context(tiny_project), "torch_xla")
    assert not isinstance(raised.value, NotApplicable)  # a crash is `failed`, never `skipped`


@pytest.mark.slow
def test_torch_compile_builds_a_hugging_face_encoder_with_three_inputs(tmp_path, monkeypatch):
    """A BERT folder's tokenizer gives token_type_ids too; its forward takes *inputs, which torch.export
    matches to one parameter ("inputs has 1 elements, but dynamic_shapes has 3" before). Slow (about 20 s
    on 2 cores): AOTInductor compiles the encoder's C++ with the system compiler."""
    from pipeline.serve.text import HF_FOLDER_FACTORY
    from tests.conftest import HF_WORDS, write_hf_folder

    monkeypatch.chdir(tmp_path)
    write_hf_folder(tmp_path / "models" / "hf_enc" / "hf")
    tokens = {"shape": ["batch", "seq"], "dtype": "int64"}
    config = ModelConfig.model_validate({
        "source": "torch", "factory": HF_FOLDER_FACTORY,
        "factory_args": {"folder": "models/hf_enc/hf", "task": "feature-extraction"},
        "inputs": {"input_ids": tokens | {"kind": "token_ids", "high": len(HF_WORDS)},
                   "attention_mask": tokens | {"kind": "attention_mask"},
                   "token_type_ids": tokens | {"kind": "token_type_ids", "high": 2}},
        "outputs": ["embedding"], "dims": {"seq": 8}, "task": "embedding",
    })  # fmt: skip
    ctx = export(tmp_path, "hf_enc", config)
    result = build(ctx, "torch_compile")
    rows = ctx.reference().head(4)
    compiled = runtimes.load("torch", ctx.out_dir / result.entry, 1, {"code_root": str(tmp_path)}).run(rows.inputs)
    np.testing.assert_allclose(compiled["embedding"], rows.outputs["embedding"], atol=1e-4)


@pytest.mark.slow
def test_torch_compile_builds_an_aotinductor_package(tiny_project):
    """Slow (about 6 s on 2 cores): AOTInductor compiles the model's C++ with the system compiler."""
    ctx = torch_build_context(tiny_project)
    out = ctx.out_dir
    result = build(ctx, "torch_compile")
    assert (out / "model.pt2").exists()
    compiled = runtimes.load("torch", out / result.entry, 1).run(X)["output"]
    eager = load_source("tiny", tiny_config(), tiny_project).predict(X)["output"]
    np.testing.assert_allclose(compiled, eager, atol=1e-5)
