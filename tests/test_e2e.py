"""End to end: the real `dvc repro` in a temporary git repo, asserting on the metrics it wrote.

Slow: one `dvc repro` of six models (about 80 stages, each a fresh Python process and most a child
process beside it: about 4 minutes on 2 cores), then the rerun test's four more repros (about 1.5
minutes). One project for every test here; each model keeps only the variants a test reads."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipeline.core import onnx_files, records
from pipeline.core.files import read_json
from pipeline.core.records import build as build_record
from pipeline.core.records import env as env_record
from pipeline.core.records import manifest as manifest_record
from pipeline.core.records import profile as profile_record
from pipeline.core.records import roofline as roofline_record
from pipeline.core.records import source as source_record
from tests.conftest import HF_WORDS, copy_project, write_hf_folder, write_params
from tests.helpers import FAST_BENCH, FAST_CONTEST
from tests.pipeline_runs import (
    ALWAYS_RUN,
    commit_and_repro,
    init_project,
    keeping,
    metrics,
    pinned_deploy_predicts,
    read,
    reference,
    run,
    stages_run,
    tracked,
)
from tests.test_add import odd_name_file
from tests.test_roofline import isa_ceiling_gmacs

pytestmark = pytest.mark.slow

# One variant per pass family on spam_fnn (each pass has its own tests): ORT's export and static INT8, NNCF's
# INT8 and its accuracy-control fallback, eager PyTorch. The other ORT and OpenVINO passes run on byo_fixed,
# which goes through every ONNX variant (external weights, a fixed batch), and the transformers; AOTInductor
# (torch_compile) is tests/test_tf_jax.py's.
VARIANTS = ["onnx_fp32", "onnx_int8_static", "openvino_int8", "openvino_int8_acc", "torch_eager"]
ONNX_VARIANTS = ["onnx_fp32", "onnx_opt", "onnx_fp16", "onnx_int8_dynamic", "onnx_int8_static", "openvino_fp32",
                 "openvino_fp16", "openvino_int8"]  # fmt: skip
# Activations quantized at run time: for transformers, run on the tiny encoder and the HF classifier only
RUN_TIME_INT8 = ["onnx_int8_blockwise", "openvino_int8_dynamic"]


GPU_VARIANTS = ["onnx_cuda_fp32", "onnx_cuda_fp16", "onnx_trt_fp16", "onnx_trt_int8", "tensorrt_fp16",
                "tensorrt_int8", "torch_compile_cuda"]  # fmt: skip
GPU_KEPT = ["onnx_cuda_fp32", "tensorrt_int8"]


SPAM_SKIP = keeping("torch", *VARIANTS, *GPU_KEPT, "torch_xla")
# The tiny transformer covers token inputs and a dynamic sequence axis (FP16 of a transformer graph must load)
BERT_SKIP = keeping("torch", "onnx_fp32", "onnx_fp16", "openvino_fp32", "torch_eager", *RUN_TIME_INT8)
MODELS = ["spam_fnn", "byo_onnx", "byo_fixed", "bert_e2e", "broken", "hf_clf"]  # Keras, JAX: test_e2e_frameworks
HF_SKIP = keeping("torch", "onnx_fp32", "torch_eager", "openvino_int8", *RUN_TIME_INT8)


@pytest.fixture(scope="module")
def project(tmp_path_factory, tiny_onnx):
    """The repository's pipeline on spam_fnn (trained small), a bring-your-own ONNX model, an ONNX
    file from another exporter (batch fixed to 1, a baked Reshape, external weights), a tiny
    transformer, and a model whose file is broken (it must not stop the others)."""
    root = copy_project(tmp_path_factory.mktemp("e2e") / "project")
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["models"] = [m for m in MODELS if m not in ("byo_fixed", "hf_clf")]  # added by `python -m pipeline add`
    params["train"] = {
        "spam_fnn": params["train"]["spam_fnn"] | {"samples": 4000, "epochs": 2},
    }
    params["catalog"]["spam_fnn"]["skip"] = SPAM_SKIP
    params["catalog"]["byo_onnx"] = {  # no eval data: fidelity on generated inputs
        "source": "onnx",
        "file": "model.onnx",
        "inputs": {"x": {"shape": ["batch", 12]}},
        "metric": "accuracy",
        "skip": keeping("onnx", "onnx_fp32"),
    }
    params["catalog"]["bert_e2e"] = params["catalog"]["minilm_l6"] | {
        "factory_args": {"vocab_size": 200, "hidden": 32, "layers": 1, "heads": 2, "intermediate": 64},
        "dims": {"seq": 16},
        "dim_sweep": {"seq": [8, 32]},
        "skip": BERT_SKIP,
    }
    params["catalog"]["broken"] = params["catalog"]["byo_onnx"] | {"skip": keeping("onnx", "onnx_fp32")}
    params["bench"] = FAST_BENCH
    # Each release's runtime loads and answers; its latency beside ours is timed over the fewest rounds
    # (side_by_side.MIN_ROUNDS): what a longer timing gives is tests/test_serving_releases.py's
    params["serving"] = params["serving"] | {"compare_seconds": 0.01}
    params["select"]["contest"] = FAST_CONTEST
    # The fallback openvino_int8_acc is built only when openvino_int8 breaks a quality constraint: spam_fnn's
    # decisions judged beside its task metric, at a tight F1, make it (INT8 flips some), byo_fixed's loose
    # cosine does not
    params["select"]["models"] = {"spam_fnn": {"metric_decides": False, "min_decision_f1": 0.9999}}
    params["targets"] = ["cpu", "cuda:0"]  # two GPU variants show the target plumbing through DVC
    params["gpu_variants"] = {name: {} for name in GPU_KEPT}
    params["export"]["max_eval_samples"] = 500
    params["variants"] = {k: v for k, v in params["variants"].items() if not k.startswith("lm_")}  # test_generation
    write_params(root, params)
    for name in ("byo_onnx", "broken"):
        (root / "models" / name).mkdir()
        shutil.copy(tiny_onnx, root / "models" / name / "model.onnx")
    truncated = root / "models" / "broken" / "model.onnx"
    truncated.write_bytes(truncated.read_bytes()[:200])
    (root / "models" / "bert_e2e").mkdir()  # every model has a folder (DVC watches it); the code is minilm_l6's
    (root / "models" / "bert_e2e" / "README.md").write_text("A smaller minilm_l6, built by its factory.\n")
    init_project(root)
    # byo_fixed comes the one-command way: `add` reads its entry off the file (model.onnx + model.onnx.data, its
    # input named `gpu_0/data_0` as in the ONNX zoo's ResNets)
    run([sys.executable, "-m", "pipeline", "add", "byo_fixed", str(odd_name_file(root.parent / "elsewhere"))], root)
    # hf_clf: a Hugging Face classifier folder and labelled text, tokenized by its own tokenizer
    texts = root.parent / "reviews.jsonl"
    texts.write_text("".join(json.dumps({"text": f"{w} film {v}", "label": i % 2}) + "\n"
                             for i, (w, v) in enumerate(itertools.product(HF_WORDS[5:], HF_WORDS[5:]))))  # fmt: skip
    folder = write_hf_folder(root.parent / "hf_clf", "BertForSequenceClassification")
    run([sys.executable, "-m", "pipeline", "add", "hf_clf", str(folder), "--eval", str(texts), "--dim", "seq=8"], root)
    params = yaml.safe_load((root / "params.yaml").read_text())
    # seeded random weights: its 'scores' (a name that reads as logits by argmax) are declared plain values, judged
    # by a loose cosine alone, so that every variant of it goes through
    params["select"]["models"]["byo_fixed"] = {"min_cosine": 0.5, "min_neighbour_recall": 0.5, "max_value_error": None}
    params["catalog"]["byo_fixed"]["judged_as"] = {"scores": "values"}
    params["catalog"]["byo_fixed"]["skip"] = keeping("onnx", *ONNX_VARIANTS, "openvino_int8_acc")
    # a CNN gets no dynamic INT8 by default (Pass.not_for); op_types builds it: external weights through ORT's quantizer
    params["catalog"]["byo_fixed"]["overrides"] = {"onnx_int8_dynamic": {"op_types": ["Conv", "MatMul"]}}
    params["catalog"]["hf_clf"]["skip"] = HF_SKIP
    write_params(root, params)
    return root, commit_and_repro(root)


def assert_budget(m: dict, numbers: dict, batches: set[str]) -> None:
    """A full budget has the sweep and evaluates at its peak batch (at most 64); a variant out of
    contention (which ones depends on the order and the machine's minutes) has none, and says why."""
    if m["screen"]["budget"] == "short":
        assert m["screen"]["reason"].startswith("out of contention") and m["screen"]["best_known"]
        assert "throughput_sps" not in m and "throughput_concurrent" not in m and "peak_sps" not in numbers
        assert m["fidelity_batch"] == (m["fixed_batch"] or 64)
        return
    assert set(m["throughput_sps"]["by_batch"]) == batches  # a dict: DVC drops lists
    assert m["throughput_sps"]["peak"] == max(m["throughput_sps"]["by_batch"].values()) == numbers["peak_sps"]
    assert m["cpu_util_pct"]["sweep"] > 0
    assert m["throughput_sps"]["stopped_by"] and m["throughput_concurrent"]["sps"] > 0
    assert set(m["rss_mb_by_batch"]) == set(m["throughput_sps"]["by_batch"])
    assert m["fidelity_batch"] == min(m["throughput_sps"]["peak_batch"], 64)


def test_every_variant_writes_schema_metrics(project):
    """Slow (its project, about 4 min: the real pipeline on a tiny zoo through DVC). The only test that checks
    every variant's metrics record, as the bench stage writes it and DVC tracks it, field by field."""
    root, output = project
    assert {f"bench@spam_fnn-{v}" for v in VARIANTS} <= stages_run(output)
    for variant in VARIANTS:
        m = metrics(root, "spam_fnn", variant)
        assert m["status"] == "ok", (variant, m["reason"])
        assert m["size_mb"] > 0 and m["load_ms"] > 0 and m["first_infer_ms"] > 0
        assert set(m["latency_ms"]) == {"p50", "p90", "p99", "mean", "std", "min", "max", "n"}
        assert 0 < m["latency_ms"]["p50"] <= m["latency_ms"]["p99"] and m["latency_ms"]["n"] >= 20
        assert m["peak_rss_mb"] >= m["load_rss_mb"] > 10 and m["threads"] == 1
        assert m["cpu_util_pct"]["latency"] > 0
        assert_budget(m, tracked(root, "spam_fnn", variant), {"b1", "b16"})
        assert m["eval_rows"]["used"] == m["accuracy"]["eval_samples"] == m["eval_rows"]["available"]  # labelled
        if Path("/sys/class/powercap").is_dir():
            assert m["energy"]["mj_per_inference"] > 0 or m["energy"]["reason"]
        else:
            assert m["energy"] == {"mj_per_inference": None, "reason": m["energy"]["reason"]}
        assert m["accuracy"]["metric"] == "binary_accuracy" and 0.5 < m["accuracy"]["value"] <= 1
        assert isinstance(m["noisy"], bool) and 0 <= m["waited_s"] < 1  # dvc repro runs one stage at a time
        assert m["p50_ci_pct"] is None or m["p50_ci_ms"]["low"] <= m["latency_ms"]["p50"] <= m["p50_ci_ms"]["high"]
        assert m["memory_how"].startswith("VmHWM")
        assert not any(isinstance(v, list) for v in m.values())
        numbers = tracked(root, "spam_fnn", variant)
        assert numbers["status"] == "ok" and numbers["p50_ms"] == m["latency_ms"]["p50"]
        assert numbers["footprint_mb"] == pytest.approx(m["peak_rss_mb"] - m["baseline_rss_mb"], rel=1e-4)
        assert all(isinstance(v, float) for k, v in numbers.items() if k != "status"), numbers
    fp32 = metrics(root, "spam_fnn", "onnx_fp32")
    fidelity = fp32["fidelity"]["probability"]
    assert abs(fp32["accuracy"]["delta"]) < 1e-9 and fidelity["max_abs_diff"] < 1e-4 and fidelity["decision_f1"] == 1
    assert fidelity["output_kind"] == "probabilities" and fidelity["decision_flips"] == 0  # one probability a row
    assert fidelity["cosine_min"] > 0.9999 and fidelity["rel_l2"] < 1e-4


def test_gpu_variants_run_on_their_target_or_say_why_not(project):
    root, _ = project
    probe = read(root / "reports" / "env.json")["targets"]["cuda:0"]
    for variant in GPU_KEPT:
        m = metrics(root, "spam_fnn", variant)
        assert m["device"] == "cuda:0"
        if not probe["available"]:
            assert m["status"] == "skipped" and m["reason"] == f"target cuda:0 is not usable here: {probe['reason']}"
        else:  # a usable GPU: measured, or skipped only for a package the [gpu] extra did not bring
            assert m["status"] == "ok" or (m["status"] == "skipped" and "not installed" in m["reason"]), m["reason"]
    gpu_files = {p.stem for p in (root / "reports" / "metrics" / "spam_fnn").glob("*.json")} & set(GPU_VARIANTS)
    assert gpu_files == set(GPU_KEPT)  # GPU variants not listed in gpu_variants get no stage and no file
    assert metrics(root, "spam_fnn", "onnx_fp32")["device"] == "cpu"
    summary = run([sys.executable, "-m", "pipeline", "summary", "spam_fnn", "--wide"], root)  # notes in full
    if not probe["available"]:
        assert summary.count("target cuda:0 is not usable here") == 1  # one note for both variants


def test_openvino_variants_record_precision_streams_and_cached_load(project):
    root, _ = project
    fp32 = metrics(root, "byo_fixed", "openvino_fp32")
    assert fp32["inference_precision"] == "f32" and fp32["fidelity"]["scores"]["max_abs_diff"] < 1e-4
    assert fp32["load_cached_ms"] > 0 and fp32["load_ms"] > 0
    int8 = metrics(root, "spam_fnn", "openvino_int8")
    concurrent = int8.get("throughput_concurrent")  # none out of contention (tests/test_openvino.py has the queue)
    assert concurrent is None or (concurrent["streams"] >= 1 and "AsyncInferQueue" in concurrent["how"])
    assert abs(int8["accuracy"]["delta"]) < 0.05 and int8["fidelity"]["probability"]["decision_f1"] > 0.9
    assert metrics(root, "spam_fnn", "openvino_int8")["fidelity"]["probability"]["max_rel_diff"] > 0.005
    build = metrics(root, "spam_fnn", "openvino_int8_acc")["build"]  # so its fallback searched
    assert build["max_drop"] == 0.01 and build["stopped_by"] == "nncf" and build["reached_max_drop"] is True
    assert build["validation_drop"] <= 0.01 and "calib.npz" in build["validation_origin"]  # not scoring rows
    assert "(validation, split seed" in build["validation_origin"]  # nor the rows it calibrated on


def test_torch_xla_runs_where_torchax_is_installed_and_says_why_not_elsewhere(project):
    import importlib.util

    root, _ = project
    m = metrics(root, "spam_fnn", "torch_xla")
    if importlib.util.find_spec("torchax") is None:
        assert m["status"] == "skipped" and m["reason"].startswith("torchax is not installed")
    else:
        assert m["status"] == "ok", m["reason"]


def test_a_hugging_face_classifier_added_with_one_command_reaches_a_choice(project):
    """`add` on a save_pretrained folder and labelled text: accuracy on held-out text rows, a choice."""
    root, _ = project
    export = read(root / "reports" / "export" / "hf_clf.json")
    assert export["status"] == "ok" and export["exporter"] == "torch.onnx (torchscript)"
    assert export["held_out"]["scoring"]["origin"].startswith("models/hf_clf/eval.npz: ")  # the tokenized text, split
    for variant in ("torch_eager", "onnx_fp32", "openvino_int8"):
        m = metrics(root, "hf_clf", variant)
        assert m["status"] == "ok", (variant, m["reason"])
        assert m["accuracy"]["metric"] == "accuracy" and m["accuracy"]["value"] is not None
        assert m["fidelity"]["logits"]["top1_agreement"] is not None
    choice = read(root / "reports" / "selection" / "hf_clf.json")
    assert choice["status"] == "ok" and choice["chosen"] in {"torch_eager", "onnx_fp32", "openvino_int8"}
    # predict --text: the deployment tokenizes with the folder's tokenizer and names the label (config.json)
    deploy = root / "deploy" / "hf_clf"
    assert read(deploy / "manifest.json")["text"]["labels"] == {"0": "neg", "1": "pos"}
    assert not list((deploy / "tokenizer").glob("*.safetensors*"))  # the weights are the artifact's, not copied
    texts = ["the film was good", "a bad film"]
    shown = run([sys.executable, "-m", "pipeline", "predict", str(deploy), *(f"--text={t}" for t in texts)], root)
    lines = shown.splitlines()[1:]
    assert [line.split(": ", 1)[1] for line in lines] == texts
    assert all(line.split()[0] in {"neg", "pos"} for line in lines)  # e.g. "pos (0.506): the film was good"
    run([sys.executable, "-m", "pipeline", "predict", str(deploy), f"--text={texts[0]}", "--output", "t.npy"], root)
    from transformers import AutoTokenizer

    tokens = AutoTokenizer.from_pretrained(root / "models" / "hf_clf" / "hf")(texts[:1], return_tensors="np")
    names = read(deploy / "manifest.json")["inputs"]  # token_type_ids too: BERT has segments
    np.savez(root / "t.npz", **{name: tokens[name].astype(np.int64) for name in names})
    run([sys.executable, "-m", "pipeline", "predict", str(deploy), "t.npz", "--output", "ids.npy"], root)
    np.testing.assert_allclose(np.load(root / "t.npy"), np.load(root / "ids.npy"), rtol=1e-6)  # the same ids ran


@pytest.mark.parametrize("variant", RUN_TIME_INT8)
def test_int8_with_activations_quantized_at_run_time_on_an_encoder_and_a_classifier(project, variant):
    """Built and measured through DVC on the tiny encoder (neighbour agreement) and the Hugging Face
    classifier (top-1 agreement, accuracy); each build says whether the runtime quantized activations."""
    root, _ = project
    for model, output in (("bert_e2e", "embedding"), ("hf_clf", "logits")):
        m = metrics(root, model, variant)
        assert m["status"] == "ok", (model, m["reason"])
        assert isinstance(m["build"]["activations_quantized_at_run_time"], bool), m["build"]
        if not m["build"]["activations_quantized_at_run_time"]:
            assert m["precision_note"].startswith("INT8 weights, float matrix products")
        quality = tracked(root, model, variant)
        if model == "bert_e2e":
            assert 0 <= quality["neighbour_recall"] <= 1 and quality["similarity_rank_corr"] is not None
        else:
            assert quality["top1_agreement"] is not None and m["accuracy"]["value"] is not None
        assert m["fidelity"][output]["cosine_min"] is not None


def test_bring_your_own_onnx_without_data(project):
    root, _ = project
    export = json.loads((root / "reports" / "export" / "byo_onnx.json").read_text())
    assert export["parity"] == "ok" and export["parity_how"].startswith("by construction")  # copied, not re-run
    fp32 = metrics(root, "byo_onnx", "onnx_fp32")
    assert fp32["status"] == "ok"
    accuracy = {k: fp32["accuracy"][k] for k in ("metric", "value", "delta")}
    assert accuracy == {"metric": "none", "value": None, "delta": None}  # no labels: no task metric
    assert fp32["fidelity"]["output"]["top1_agreement"] == 1.0 and fp32["fidelity"]["output"]["cosine_min"] > 0.9999
    # a pair that cannot apply (a torch variant of an ONNX file) gets no stage and no file, and the
    # summary, the select record and the report list it once, with its reason
    stages = run(["dvc", "stage", "list", "--all", "--name-only"], root).split()
    assert {"variants/onnx_fp32/dvc.yaml:bench@byo_onnx", "variants/torch_eager/dvc.yaml:bench@spam_fnn"} <= set(stages)
    assert not [name for name in stages if name.startswith("variants/torch_eager/") and name.endswith("@byo_onnx")]
    assert not (root / "reports" / "metrics" / "byo_onnx" / "torch_eager.json").exists()
    reason = "needs a torch source; byo_onnx is a onnx model"
    summary = run([sys.executable, "-m", "pipeline", "summary", "byo_onnx", "--wide"], root)  # notes in full
    listed = [line for line in summary.splitlines() if reason in line]
    assert len(listed) == 1 and "torch_eager" in listed[0] and "skipped-not-applicable" in listed[0], summary
    assert summary.count("torch_eager") == 1
    assert read(root / "reports" / "selection" / "byo_onnx.json")["not_applicable"]["torch_eager"] == reason
    report = (root / "reports" / "report" / "byo_onnx.md").read_text()
    assert report.count("`torch_eager`") == 1 and reason in report
    export = json.loads((root / "reports" / "export" / "byo_onnx.json").read_text())
    assert export["status"] == "ok" and export["parity"] == "ok"


HANDOFFS = {  # every JSON one stage hands another, and the typed record that reads it
    "artifacts/*/source/source.json": lambda p: source_record.SourceRecord.model_validate(read_json(p)),
    "artifacts/*/*/build.json": lambda p: build_record.load(p.parent),
    "reports/details/*/*.json": lambda p: records.parse(read_json(p)),
    "reports/metrics/*/*.json": lambda p: records.Metrics.model_validate(read_json(p)),
    "reports/selection/*.json": lambda p: records.parse_choice(read_json(p)),
    "reports/profile/*/*.json": lambda p: profile_record.Profile.model_validate(read_json(p)),
    "reports/export/*.json": lambda p: source_record.ExportReport.model_validate(read_json(p)),
    "reports/env.json": lambda p: env_record.parse(read_json(p)),
    "reports/peaks.json": lambda p: roofline_record.load_peaks(p.parent.parent),
    "reports/roofline/*.json": lambda p: roofline_record.load_distances(p.stem, p.parent.parent.parent),
    "deploy/*/manifest.json": lambda p: manifest_record.load(p.parent),
}
NOT_HANDOFFS = (  # read by nothing but DVC or a person: code hashes, plot rows, logs, library versions
    "reports/plan/*.json",
    "reports/plots/*/*.json",
    "reports/train/*.json",
    "reports/bench_plan.json",
    "reports/benchmarks/*.json",
    "reports/software.json",
    "reports/logs/**/*.json",
    "reports/distance/*/*.json",  # the roofline's three DVC metrics, copied from reports/roofline/<model>.json
)


def test_every_json_a_repro_writes_loads_through_its_typed_record(project):
    """A file a stage writes is read through one typed record (pipeline.core.records): each one the
    repro wrote loads, and none is left out of both lists. Files inside an artifact (an entry the
    runtime reads, a tokenizer) are the artifact, not a hand-off."""
    root, _ = project
    artifact_files = {p for p in (root / "artifacts").rglob("*.json") if p.name not in ("source.json", "build.json")}
    artifact_files |= {p for p in (root / "deploy").rglob("*.json") if p.name != "manifest.json"}
    loaded = {path for pattern, load in HANDOFFS.items() for path in root.glob(pattern) if load(path) is not None}
    listed = {path for pattern in NOT_HANDOFFS for path in root.glob(pattern)}
    written = {p for folder in ("artifacts", "reports", "deploy") for p in (root / folder).rglob("*.json")}
    assert written - loaded - listed - artifact_files == set()
    assert {p.name for p in loaded} >= {"source.json", "build.json", "manifest.json", "env.json"}


def test_every_deployed_choice_carries_engine_repositories_that_pass_their_checks(project):
    """deploy/<model>/serving/: a Triton and an OVMS repository (and KServe services for them) whose
    configs pass the engines' own schemas and every check against the artifact, or one line per engine
    saying why it cannot serve the artifact as it is; the measured settings land in them."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    from pipeline.serve.repositories.check import check_kserve, check_ovms, check_triton
    from pipeline.serve.signature import read_signature

    root, _ = project
    served = {}
    for folder in sorted((root / "deploy").iterdir()):
        manifest = manifest_record.load(folder)
        serving = folder / "serving"
        if not manifest.variant:
            assert not serving.exists(), folder
            continue
        readme, problems = (serving / "README.md").read_text(), []
        for engine in ("triton", "ovms"):
            if not (serving / engine).is_dir():
                assert f"- {engine}: cannot serve {manifest.model} as is: " in readme, folder
                continue
            served.setdefault(manifest.model, []).append(engine)
            problems += check_kserve(serving / "kserve" / f"{engine}.yaml", manifest)
        if (serving / "triton").is_dir():
            problems += check_triton(serving / "triton", manifest, read_signature(folder, manifest))
            config = text_format.Parse(
                (serving / "triton" / manifest.model / "config.pbtxt").read_text(), model_config_pb2.ModelConfig()
            )
            concurrent = manifest.metrics.throughput_concurrent
            assert config.instance_group[0].count == concurrent.requests, folder
            if manifest.fixed_batch:
                assert config.max_batch_size == 0 and config.input[0].dims[0] == manifest.fixed_batch
        if (serving / "ovms").is_dir():
            problems += check_ovms(serving / "ovms", manifest)
        assert problems == [], folder
        timed = re.findall(r"batch-1 p50 \S+ ms there against \S+ ms on \w+ [\w.+]+ \(this pipeline's\)", readme)
        assert len(timed) == len(served.get(manifest.model, [])), readme  # serving.compare_seconds, through DVC
    assert {"spam_fnn", "byo_fixed"} <= set(served), served


def test_metrics_are_readable_by_dvc_and_the_summary(project):
    root, _ = project
    shown = json.loads(run(["dvc", "metrics", "show", "--json"], root))
    files = next(iter(shown.values()))["data"]
    assert set(files["reports/metrics/spam_fnn/onnx_fp32.json"]["data"]) <= {
        "status", "p50_ms", "p50_ci_pct", "p99_ms", "peak_sps", "footprint_mb", "size_mb", "load_ms",
        "acc_delta", "decision_f1", "cosine_min", "top1_agreement", "neighbour_recall", "similarity_rank_corr",
    }  # fmt: skip
    assert set(files["reports/distance/spam_fnn/onnx_fp32.json"]["data"]) == {"of_bound", "of_bound_peak", "bound_by"}
    done = subprocess.run(["dvc", "metrics", "show"], cwd=root, capture_output=True, text=True)
    assert "failed to load" not in done.stderr and max(map(len, done.stdout.splitlines())) <= 300  # 17 columns
    summary = run([sys.executable, "-m", "pipeline", "summary"], root)
    assert "spam_fnn" in summary and "onnx_int8_static" in summary and "byo_onnx" in summary


def test_select_deploys_an_explained_verified_choice(project):
    root, output = project
    assert {f"select@{m}" for m in MODELS} | {"report"} <= stages_run(output)
    record = read(root / "reports" / "selection" / "spam_fnn.json")
    chosen = record["chosen"]
    assert record["status"] == "ok" and metrics(root, "spam_fnn", chosen)["status"] == "ok"
    deploy = root / "deploy" / "spam_fnn"
    manifest = read(deploy / "manifest.json")
    assert manifest["variant"] == chosen and manifest["runtime"] == record["runtime"]
    here = read(root / "reports" / "env.json")["machine"]["name"]
    assert manifest["machine"] == here and manifest["environment"]["machine"]["name"] == here
    assert manifest["runtime_version"] != "unknown" and manifest["inputs"]
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((deploy / name).read_bytes()).hexdigest() == digest
    selection = manifest["selection"]
    others = {p.stem for p in (root / "reports" / "details" / "spam_fnn").glob("*.json")} - {chosen}
    assert set(selection["rejected"]) == others and all(selection["rejected"].values())
    # the front is taken on the contest's figures, the tied at one latency: only a tied rival within the
    # tie-break's tolerances could still dominate the chosen one
    assert chosen in selection["pareto_front"] or chosen in selection["tied"]
    assert selection["constraints"]["max_metric_drop"] == 0.01
    if selection["contest"]:  # contenders re-measured side by side: the recorded figure is the one that ranked them
        assert record["latency_ms"] == selection["contest"]["latency_ms"][chosen] or chosen in selection["identical"]
        assert record["measured"] == "side by side with its contenders" and "side by side" in selection["why"]
    # the source's own runtime ran beside the leader, each in two workers of its own taking turns: the deployed
    # row's speed-up is the contest's paired ratio, the one the summary and the report's index print
    contest = selection["contest"]
    assert contest["baseline"] == record["baseline"] == "torch_eager" and "torch_eager" in contest["latency_ms"]
    assert "2 worker processes of its own" in contest["how"] and contest["failed"] == {}
    assert all(len(draws) == 2 for draws in contest["draw_ms"].values()) and contest["draw_spread"] >= 1
    speedup = record["speedups"][chosen]
    assert speedup == contest["speedup"][selection["identical"].get(chosen, chosen)]
    assert speedup["low"] <= speedup["ratio"] <= speedup["high"] and record["speedups"]["torch_eager"]["ratio"] == 1
    shown = f"{speedup['ratio']:.2f}x ±{100 * ((speedup['high'] / speedup['low']) ** 0.5 - 1):.1f}%"
    summary = run([sys.executable, "-m", "pipeline", "summary", "spam_fnn", "--md"], root)
    row = next(line for line in summary.splitlines() if line.startswith(f"| {chosen} |"))
    assert f"| {shown} |" in row, (shown, row)
    assert f"| {shown} |" in (root / "reports" / "report" / "index.md").read_text()
    bench_only = [v for v in others if v not in record["speedups"] and metrics(root, "spam_fnn", v)["status"] == "ok"]
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in summary.splitlines() if line.startswith("| ")}
    assert bench_only and all(" | ~" in rows[v] for v in bench_only)  # the stored figures' ratio, marked as such
    report = (root / "reports" / "report" / "spam_fnn.md").read_text()
    assert f"**Deploy `{chosen}`**" in report and (root / "reports" / "report" / "img" / "spam_fnn").is_dir()
    # how far from the limit: the chosen artifact's distance in the manifest, every measured variant's in the report
    distance = manifest["roofline"]
    widths = (200, 128, 64, 32, 16, 8, 1)  # models/spam_fnn/net.py: one Gemm per pair
    assert distance["macs"] == sum(a * b for a, b in itertools.pairwise(widths))
    peaks = read(root / "reports" / "peaks.json")
    # a 0.15 MB MLP is bound by its runtime's empty call: the share reached is that call's time over its own p50
    assert distance["bound_by"] == "overhead", distance
    p50 = read(root / "reports" / "details" / "spam_fnn" / f"{chosen}.json")["latency_ms"]["p50"]
    assert distance["of_bound"] == pytest.approx(peaks["overhead_ms"][manifest["runtime"]]["center"] / p50, abs=1e-4)
    assert "## How far from the limit" in report and (root / "reports/report/img/spam_fnn/roofline.png").is_file()
    assert 0.1 < peaks["macs_gmacs"]["fp32"]["onnxruntime"]["center"] <= isa_ceiling_gmacs("fp32")
    assert 0 < peaks["overhead_ms"]["onnxruntime"]["center"] < 10  # a zero-work call: microseconds, not ms
    plots = json.loads(run(["dvc", "plots", "show", "--json"], root))
    assert not plots.get("errors")
    assert "reports/plots/latency_accuracy/spam_fnn.json" in plots["data"]


def test_predict_cli_and_api_run_the_chosen_artifact(project, tmp_path):
    from pipeline.serve.predict import load

    root, _ = project
    data = reference(root, "spam_fnn")
    np.save(tmp_path / "x.npy", next(iter(data.inputs.values())))
    deploy = root / "deploy" / "spam_fnn"
    out = run([sys.executable, "-m", "pipeline", "predict", str(deploy), "x.npy",
               "--output", "y.npy"], tmp_path)  # fmt: skip
    assert "spam_fnn:" in out and "wrote" in out
    expected = next(iter(data.outputs.values()))
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, atol=0.05)
    outputs = load(deploy, threads=1)(data.inputs)
    np.testing.assert_allclose(next(iter(outputs.values())), expected, atol=0.05)
    tampered = shutil.copytree(deploy, tmp_path / "tampered")
    victim = tampered / next(iter(read(tampered / "manifest.json")["files"]))
    victim.write_bytes(victim.read_bytes() + b"\0")
    done = subprocess.run([sys.executable, "-m", "pipeline", "predict", str(tampered), "x.npy"], cwd=tmp_path,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2 and "sha256 mismatch" in done.stderr


@pytest.mark.parametrize(
    ("model", "variant"),
    [("spam_fnn", "torch_eager"), ("spam_fnn", "openvino_int8"), ("spam_fnn", "onnx_int8_static")],
    # the Keras and JAX runtimes: tests/test_e2e_frameworks.py; AOTInductor's: tests/test_tf_jax.py
)  # fmt: skip
def test_every_runtime_deploys_and_predicts(project, tmp_path, model, variant):
    pinned_deploy_predicts(project[0], tmp_path / "side", model, variant)


def test_noop_then_one_variant_param_reruns_only_that_variant(project):
    """Slow (about 80 s: four more `dvc repro` runs of the e2e project). The only test that a no-op `dvc repro`
    reruns no stage, that one variant's knob reruns that variant's stages and the selection, and that an edit to
    report code or to one pass reruns only what runs that code."""
    root, _ = project
    run(["git", "add", "-A"], root)
    run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "first run"], root)
    repro = [sys.executable, "-m", "pipeline", "repro"]  # dvc repro with the progress line; DVC's output in a log

    def rerun() -> set[str]:
        shown = run(repro, root)
        assert "Running stage" not in shown  # DVC's chatter goes to the log (the progress line to stderr)
        return stages_run((root / "reports" / "logs" / "repro.log").read_text())

    assert rerun() == ALWAYS_RUN
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["machine_variants"]["onnx_int8_static"]["per_channel"] = False
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    ran = rerun()
    from pipeline.core.config import load_params
    from pipeline.optimize.applicability import applicable_models

    params = load_params(root / "params.yaml")
    applies = lambda variant: applicable_models(params, variant)  # noqa: E731 (the models with the variant's stages)
    assert applies("onnx_int8_static") == ["spam_fnn", "byo_fixed"]  # the others skip it
    rebuilt = {f"build@{m}-onnx_int8_static" for m in applies("onnx_int8_static")}
    remeasured = {f"bench@{m}-onnx_int8_static" for m in applies("onnx_int8_static")}  # their plan file changed
    reselected = {f"select@{m}" for m in applies("onnx_int8_static")} | {"report"}
    planned = {"plan"}  # rewrites every variant's file; only one changes
    assert ran == ALWAYS_RUN | planned | rebuilt | remeasured | reselected
    took = read(root / "reports" / "logs" / "repro_time.json")  # where the time went, by stage kind
    assert took["build"]["stages"] == len(rebuilt) and took["bench"]["stages"] == len(remeasured), took
    diff = json.loads(run(["dvc", "metrics", "diff", "--json"], root))
    assert {path.split("/")[-1] for path in diff} == {"onnx_int8_static.json"}, sorted(diff)
    assert len(run(["dvc", "metrics", "diff"], root).splitlines()) < 40
    run(["git", "add", "-A"], root)
    run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "per_channel"], root)
    # An edit to report code reruns the report stage only; an edit to one pass, that pass's variants only.
    report_code = root / "pipeline" / "present" / "report.py"
    report_code.write_text(report_code.read_text() + "\n# an edit\n")
    assert rerun() == ALWAYS_RUN | {"plan", "report"}  # the plan rehashes the code: only report's hash moved
    # ORT's dynamic quantizer: one model's variant here (byo_fixed's), so the rerun stays short
    dynamic = Path("pipeline/optimize/passes/onnxruntime/quantize_dynamic.py")
    (root / dynamic).write_text((root / dynamic).read_text() + "\n# an edit\n")
    ran = rerun()
    from pipeline.optimize.plan import variant_code

    users = {v for v in params.all_variants if dynamic in variant_code(v, root)}
    assert "onnx_int8_dynamic" in users and "onnx_opt" not in users  # onnx_opt shares its optimizer, not this
    assert applies("onnx_int8_dynamic") == ["byo_fixed"]  # a rerun, not an empty set
    assert {n for n in ran if n.startswith("build@")} == {f"build@{m}-{v}" for v in users for m in applies(v)}
    assert {n.partition("-")[2] for n in ran if n.startswith("bench@")} <= users


def test_fixed_batch_onnx_with_external_weights_goes_through_every_variant(project):
    root, _ = project
    export = read(root / "reports" / "export" / "byo_fixed.json")
    assert export["status"] == "ok" and export["external_data"] and export["fixed_batch"] == 1
    entry = yaml.safe_load((root / "params.yaml").read_text())["catalog"]["byo_fixed"]  # written by `add`
    assert entry["inputs"] == {"gpu_0/data_0": {"shape": [1, 3, 16, 16], "dtype": "float32"}}
    status = run(["dvc", "status", "models/byo_fixed/model.onnx.dvc", "models/byo_fixed/model.onnx.data.dvc"], root)
    assert "up to date" in status  # the model files are DVC's, their .dvc files git's
    for variant in ONNX_VARIANTS:
        m = metrics(root, "byo_fixed", variant)
        assert m["status"] == "ok", (variant, m["reason"])
        assert m["fixed_batch"] == 1 and m["fidelity_batch"] == 1
        assert_budget(m, tracked(root, "byo_fixed", variant), {"b1"})
        short = m["screen"]["budget"] == "short"  # out of contention: the looser bound's 59 rows
        assert m["eval_rows"]["used"] == min(59 if short else 299, m["eval_rows"]["available"])  # no labels
        scores = m["fidelity"]["scores"]
        assert scores["cosine_mean"] > 0.9 and scores["top1_agreement"] is None
        assert (scores["output_kind"], scores["kind_from"]) == ("values", "declared (judged_as)")
    fallback = metrics(root, "byo_fixed", "openvino_int8_acc")  # openvino_int8 met min_cosine 0.5: no search
    assert fallback["kind"] == "skipped-not-needed" and fallback["reason"].startswith(
        "not needed: openvino_int8 meets byo_fixed's quality constraints (worst-output fidelity 0."
    )
    assert (root / "artifacts" / "byo_fixed" / "onnx_fp32" / "model.onnx.data").is_file()
    for variant in ("onnx_int8_dynamic", "onnx_int8_static"):  # no scratch copies of the weights left behind
        folder = root / "artifacts" / "byo_fixed" / variant
        side = {p.name for p in onnx_files.external_files(folder / "model.onnx")}
        assert {p.name for p in folder.iterdir()} == {"model.onnx", "build.json", *side}, variant
    details = read(root / "reports" / "details" / "byo_fixed" / "onnx_fp16.json")
    assert details["build"]["load_check"].startswith("ok: loaded by onnxruntime")
    manifest = read(root / "deploy" / "byo_fixed" / "manifest.json")
    assert manifest["fixed_batch"] == 1


def test_transformer_deploys_and_predicts_at_any_sequence_length(project, tmp_path):
    root, _ = project
    swept = []
    for variant in ("onnx_fp32", "onnx_fp16", "openvino_fp32", "torch_eager"):
        m = metrics(root, "bert_e2e", variant)
        assert m["status"] == "ok", (variant, m["reason"])
        assert m["dims"] == {"seq": 16} and m["fixed_batch"] is None
        if m["screen"]["budget"] == "short":  # out of contention: no dim sweep, and the record says why
            assert "latency_ms_by_dim" not in m and "out of contention" in m["screen"]["reason"]
            continue
        assert set(m["latency_ms_by_dim"]["seq"]) == {"8", "32"}
        assert m["latency_ms_by_dim"]["seq"]["8"]["p50"] > 0
        swept.append(variant)
    assert swept  # the fastest of them is never out of contention
    export = read(root / "reports" / "export" / "bert_e2e.json")
    assert export["family"]["model_type"] == "transformer" and export["exporter"] == "torch.onnx (torchscript)"
    assert {role: r["rows"] for role, r in export["held_out"].items()} == {
        r: 256 for r in ("scoring", "calibration", "validation")
    }
    from pipeline.core.config import InputSpec
    from pipeline.core.data import generate_inputs

    deploy = root / "deploy" / "bert_e2e"
    specs = {k: InputSpec.model_validate(v) for k, v in read(deploy / "manifest.json")["inputs"].items()}
    for seq in (7, 29):
        np.savez(tmp_path / f"x{seq}.npz", **generate_inputs(specs, 3, seq, {"seq": seq}, vocab_size=200))
        out = run([sys.executable, "-m", "pipeline", "predict", str(deploy), f"x{seq}.npz",
                   "--output", f"y{seq}.npy"], tmp_path)  # fmt: skip
        assert "bert_e2e:" in out and np.load(tmp_path / f"y{seq}.npy").shape == (3, 32)


def test_a_broken_model_does_not_stop_the_others(project):
    root, _ = project
    export = read(root / "reports" / "export" / "broken.json")
    assert (
        export["status"] == "failed" and "not a valid ONNX model (params.yaml: catalog.broken.file)" in export["reason"]
    )
    m = metrics(root, "broken", "onnx_fp32")
    assert m["status"] == "failed" and "the source model failed" in m["reason"]
    assert read(root / "reports" / "selection" / "broken.json")["chosen"] == "none"
    summary = run([sys.executable, "-m", "pipeline", "summary", "--wide"], root)  # notes in full
    assert "broken" in summary and "the source model failed" in summary
