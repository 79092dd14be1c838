"""A model whose source cannot load fails alone; `check` finds bad files before anything runs;
batch sizes follow measured memory."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from pipeline.core import layout
from pipeline.core.config import Params
from pipeline.core.errors import ConfigError, ModelFileError, PipelineError
from pipeline.core.memory import batch_limit, batch_size, peak_rss_growth_mb
from pipeline.measure.stage import benchmark_variant
from pipeline.optimize.stage import build_variant
from pipeline.prepare.check import check_models
from pipeline.prepare.export import export_model, token_bounds
from pipeline.prepare.held_out import held_out_sets, user_eval_set
from tests.conftest import tiny_config


def params_for(**catalogs) -> Params:
    return Params.model_validate(
        {
            "models": list(catalogs),
            "catalog": {name: config.model_dump() for name, config in catalogs.items()},
            "variants": {"onnx_fp32": {}, "torch_eager": {}},
        }
    )


def test_a_broken_source_fails_every_variant_with_its_reason_and_nothing_else(tiny_project, machine):
    params = params_for(tiny=tiny_config(file="missing.pt"))
    report = export_model("tiny", params, tiny_project)
    assert report["status"] == "failed" and "missing.pt: not found (params.yaml: catalog.tiny.file)" in report["reason"]
    saved = json.loads(layout.export_report("tiny", tiny_project).read_text())
    assert saved == report
    for variant in ("onnx_fp32", "torch_eager"):
        assert build_variant("tiny", variant, params, tiny_project).status == "failed"
        record = benchmark_variant("tiny", variant, params, tiny_project)
        assert record.status == "failed" and "the source model failed: " in record.reason
        assert "missing.pt" in record.reason


def test_a_failed_build_keeps_the_childs_stderr_and_a_command_that_reproduces_it(tiny_project):
    params = params_for(tiny=tiny_config())
    export_model("tiny", params, tiny_project)
    exported = layout.source_dir("tiny", tiny_project) / layout.EXPORTED_ONNX
    exported.write_bytes(exported.read_bytes()[:100])  # damaged after the export's own checks
    info = build_variant("tiny", "onnx_fp32", params, tiny_project)
    log = layout.log_file("tiny", "onnx_fp32", "build", tiny_project)
    assert info.status == "failed" and f"[log: {log}; reproduce: python stages/build.py tiny onnx_fp32]" in info.reason
    assert "pipeline.optimize.stage:run_pass failed: " in log.read_text()
    assert not layout.log_file("tiny", "torch_eager", "build", tiny_project).exists()  # only failures leave logs


def test_export_records_dims_batching_and_fixed_batch(tiny_project):
    report = export_model("tiny", params_for(tiny=tiny_config()), tiny_project)
    assert report["status"] == "ok" and report["fixed_batch"] is None and report["max_batch"] >= 1
    source = json.loads((layout.source_dir("tiny", tiny_project) / layout.SOURCE_INFO).read_text())
    assert source["batching"]["per_sample_mb"] > 0 and source["inputs"]["x"]["shape"] == ["batch", 12]


def test_check_opens_every_listed_models_files(tiny_project, tiny_onnx):
    folder = tiny_project / "models" / "onnx"
    folder.mkdir()
    shutil.copy(tiny_onnx, folder / "model.onnx")
    onnx_model = tiny_config(source="onnx", factory=None, file="model.onnx", eval_data=None)
    assert check_models(params_for(tiny=tiny_config(), onnx=onnx_model), tiny_project) == []
    wrong = onnx_model.model_copy(update={"inputs": tiny_config(inputs={"x": {"shape": ["batch", 10]}}).inputs})
    [problem] = check_models(params_for(onnx=wrong), tiny_project)
    assert "params.yaml: catalog.onnx.inputs.x.shape: " in problem and "fixes dimension 1 to 12" in problem
    path = folder / "model.onnx"
    path.write_bytes(path.read_bytes()[:64])
    [problem] = check_models(params_for(onnx=onnx_model), tiny_project)
    assert "model.onnx: not a valid ONNX model (params.yaml: catalog.onnx.file)" in problem
    path.unlink()
    [problem] = check_models(params_for(onnx=onnx_model), tiny_project)
    assert problem == f"{path}: not found (params.yaml: catalog.onnx.file)"
    np.savez(tiny_project / "models" / "tiny" / "eval.npz", x=np.zeros((4, 11), np.float32))
    [problem] = check_models(params_for(tiny=tiny_config()), tiny_project)
    assert "eval.npz (params.yaml: catalog.tiny.eval_data): array 'x' has shape (4, 11)" in problem


def test_check_names_an_output_the_pipeline_cannot_compare_and_its_fix(tiny_project):
    """A hand-written entry for a file with a sequence output (skl2onnx's ZipMap default): one line from
    `check`, not the same TypeError in the export and every variant stage."""
    from tests.test_add import bad_zipmap_file

    path = bad_zipmap_file(tiny_project / "models" / "zip")
    spec = {"x": {"shape": ["batch", 3]}}
    config = tiny_config(source="onnx", factory=None, file=path.name, eval_data=None, inputs=spec)
    [problem] = check_models(params_for(zip=config), tiny_project)
    assert problem.startswith(f"{path}: output 'probabilities' is a sequence_type, not a tensor")
    assert "export the model with tensor outputs" in problem and problem.endswith("(params.yaml: catalog.zip.file)")


def test_an_onnx_ml_graph_runs_where_its_entry_says_so(tiny_project, tmp_path):
    """skl2onnx's defaults pass `check` once the entry says onnx_ml (as `add` writes it); its ZipMap is read as a
    tensor of probabilities, first; without onnx_ml, one line says what to set."""
    from tests.conftest import write_sklearn_onnx

    path, _ = write_sklearn_onnx(tiny_project / "models" / "forest")
    spec = {"X": {"shape": ["batch", 4]}}
    config = tiny_config(source="onnx", factory=None, file=path.name, eval_data=None, inputs=spec)
    [problem] = check_models(params_for(forest=config), tiny_project)
    assert problem.startswith("params.yaml: catalog.forest.onnx_ml: ") and "(TreeEnsembleClassifier, ZipMap)" in problem
    config = config.model_copy(update={"onnx_ml": True})
    assert check_models(params_for(forest=config), tiny_project) == []
    from pipeline.prepare.sources.onnxfile import OnnxSource

    source = OnnxSource("forest", config, tiny_project)
    assert source.output_names == ["output_probability", "output_label"]
    out = source.predict({"X": np.ones((3, 4), np.float32)})
    assert out["output_probability"].shape == (3, 3) and out["output_label"].dtype == np.int64


def test_peak_memory_growth_is_measured_within_ten_percent():
    def allocate():
        block = np.ones(200 * 1_000_000 // 8)  # 200 MB, touched
        return block.sum()

    assert 180 <= peak_rss_growth_mb(allocate) <= 220


def test_batch_limit_follows_the_measured_activation_memory():
    def run(n):
        return np.ones(n * 20 * 1_000_000 // 8).sum()  # 20 MB per sample

    limit = batch_limit(run, budget_mb=200, fixed_batch=None)
    assert 7 <= limit.max_batch <= 11 and 17 <= limit.per_sample_mb <= 23
    assert batch_size(256, limit.max_batch, None) == limit.max_batch and batch_size(4, limit.max_batch, None) == 4
    assert batch_size(256, limit.max_batch, fixed_batch=1) == 1
    with pytest.raises(PipelineError, match=r"one batch of 1 needs about .* MB of activations"):
        batch_limit(run, budget_mb=10, fixed_batch=None)


TOKEN_NET = '''
import types

import torch


class Encoder(torch.nn.Module):
    def __init__(self, vocab=None):
        super().__init__()
        if vocab:
            self.config = types.SimpleNamespace(vocab_size=vocab, num_attention_heads=2, hidden_size=8)  # as in HF
        self.embed = torch.nn.Embedding(50, 8)

    def forward(self, ids):
        return self.embed(ids).mean(1)


class Wrapper(torch.nn.Module):
    """A classifier around an encoder: the vocabulary, if declared, is on the inner module."""

    def __init__(self, vocab=None):
        super().__init__()
        self.encoder = Encoder(vocab)
        self.head = torch.nn.Linear(8, 2)

    def forward(self, ids):
        return self.head(self.encoder(ids))


def build(vocab=None):
    torch.manual_seed(0)
    return Wrapper(vocab)
'''


def _token_project(root, with_eval: bool, **entry) -> Params:
    folder = root / "models" / "tok"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "net.py").write_text(TOKEN_NET)
    spec = {"source": "torch", "factory": "models.tok.net:build", "inputs": {"ids": {"shape": ["batch", "seq"],
            "dtype": "int64", "kind": "token_ids"}}, "dims": {"seq": 6}, "init_seed": 0} | entry  # fmt: skip
    if with_eval:
        ids = np.random.default_rng(0).integers(0, 30, size=(24, 6))
        np.savez(folder / "eval.npz", ids=ids)
        spec["eval_data"] = "eval.npz"
        spec.pop("dims")
    return Params.model_validate(
        {"models": ["tok"], "catalog": {"tok": spec}, "variants": {"onnx_fp32": {}}, "export": {"max_eval_samples": 24}}
    )


def test_token_ids_take_their_range_from_the_eval_data(tiny_project):
    """A wrapper with no config.vocab_size: the eval rows hold real ids, so `high:` is not needed."""
    params = _token_project(tiny_project, with_eval=True)
    report = export_model("tok", params, tiny_project)
    assert report["status"] == "ok", report["reason"]
    source = json.loads((layout.source_dir("tok", tiny_project) / layout.SOURCE_INFO).read_text())
    assert source["vocab_size"] == 30 and source["inputs"]["ids"]["high"] == 30


def test_the_models_vocabulary_is_recorded_and_bounds_the_eval_rows(tiny_project):
    """The bound predict checks ids against comes from the model's config, not from the eval data's
    largest id; an eval row past it is refused, naming the file (a Gather would misread it)."""
    from pipeline.prepare.sources.pytorch import TorchSource

    params = _token_project(tiny_project, with_eval=True, factory_args={"vocab": 40})
    report = export_model("tok", params, tiny_project)
    assert report["status"] == "ok", report["reason"]
    source = json.loads((layout.source_dir("tok", tiny_project) / layout.SOURCE_INFO).read_text())
    assert source["token_bounds"] == {"ids": 40} and source["inputs"]["ids"]["high"] == 30
    evaluation = user_eval_set("tok", params, tiny_project)
    evaluation.inputs["ids"][5, 2] = 45  # within the embedding table (50 rows), past the declared vocabulary
    source_model = TorchSource("tok", params.model("tok"), tiny_project, dims={"seq": 6})
    bounds = token_bounds("tok", params.model("tok"), source_model)
    with pytest.raises(ModelFileError) as error:
        held_out_sets("tok", params, tiny_project, evaluation, source_model, bounds)
    assert str(error.value) == (
        f"{tiny_project / 'models/tok/eval.npz'} (params.yaml: catalog.tok.eval_data): array 'ids' row 5 holds 45: "
        "token ids must lie in [0, 40), the vocabulary"
    )
    config = params.model("tok")
    declared = config.model_copy(update={"inputs": {"ids": config.inputs["ids"].model_copy(update={"high": 41})}})
    with pytest.raises(ConfigError, match=r"catalog.tok.inputs.ids.high: 41 exceeds the model's own vocabulary of 40"):
        token_bounds("tok", declared, source_model)


def test_token_ids_without_a_range_say_which_field_to_set(tiny_project):
    report = export_model("tok", _token_project(tiny_project, with_eval=False), tiny_project)
    assert report["status"] == "failed"
    assert "catalog.tok.inputs.ids.high: token_ids need the vocabulary size" in report["reason"]


def test_a_vocabulary_declared_on_a_wrapped_module_is_found(tiny_project):
    from pipeline.prepare.sources.pytorch import TorchSource

    params = _token_project(tiny_project, with_eval=False)
    config = params.model("tok").model_copy(update={"factory_args": {"vocab": 40}})
    assert TorchSource("tok", config, tiny_project).vocab_size == 40


def test_a_transformer_is_exported_for_attention_fusion_unless_told_otherwise(tiny_project):
    """`auto`: TorchScript when a (wrapped) config declares attention heads, dynamo otherwise."""
    from pipeline.core.config import ExportConfig
    from pipeline.prepare.sources.pytorch import TorchSource

    params = _token_project(tiny_project, with_eval=False)
    transformer = params.model("tok").model_copy(update={"factory_args": {"vocab": 40}})
    assert TorchSource("tok", transformer, tiny_project).exporter(ExportConfig())[0] == "torchscript"
    assert TorchSource("tiny", tiny_config(), tiny_project).exporter(ExportConfig()) == (
        "dynamo",
        "auto: not a transformer",
    )
    forced = transformer.model_copy(update={"torch_exporter": "dynamo"})
    assert TorchSource("tok", forced, tiny_project).exporter(ExportConfig()) == ("dynamo", "configured")


def test_check_imports_each_factory_and_names_a_missing_one(tiny_project):
    assert check_models(params_for(tiny=tiny_config()), tiny_project) == []
    [problem] = check_models(params_for(tiny=tiny_config(factory="models.tiny.net:biuld")), tiny_project)
    assert problem == "params.yaml: catalog.tiny.factory: 'models.tiny.net' has no attribute 'biuld'"
    [problem] = check_models(params_for(tiny=tiny_config(factory="models.tiny.nett:build")), tiny_project)
    assert problem.startswith("params.yaml: catalog.tiny.factory: cannot import 'models.tiny.nett'")


def test_a_batch_probe_the_model_aborts_natively_is_capped_at_the_largest_batch_that_ran(tiny_project):
    """A model whose forward dies by SIGABRT at 8 rows (std::bad_alloc's end in a TensorFlow model of issue
    63): the export's process dies in the batch probe, and the export runs again with batches of at most 4."""
    from tests.helpers import aborting_net

    aborting_net(tiny_project / "models" / "aborts", "x.shape[0] >= 8")
    config = tiny_config(factory="models.aborts.net:build", file=None, init_seed=0)
    shutil.copy(tiny_project / "models" / "tiny" / "eval.npz", tiny_project / "models" / "aborts")
    report = export_model("aborts", params_for(aborts=config), tiny_project)
    assert report["status"] == "ok", report["reason"]
    batching = json.loads((layout.source_dir("aborts", tiny_project) / layout.SOURCE_INFO).read_text())["batching"]
    assert batching["max_batch"] == 4 and batching["probe_batch"] == 4
    assert batching["how"].endswith("at most 4: batch 8 killed the process (SIGABRT)")
