"""The select stage's files (when nothing meets the constraints, and what one select builds), and
predict's refusal to run them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pipeline.core import records
from pipeline.core.config import load_params
from pipeline.core.errors import ModelFileError
from pipeline.core.records.manifest import TextFacts
from pipeline.decide import contest, deploy
from pipeline.decide.deploy import select_artifact
from pipeline.decide.selection import Candidate
from pipeline.serve.predict import load
from tests.conftest import REPO
from tests.helpers import metric

UNNAMED = TextFacts(task="text-classification", tokenizer="t")
TAGS = TextFacts(task="token-classification", tokenizer="t", labels={"0": "O", "1": "NEG", "2": "POS"})


def test_nothing_feasible_names_the_closest_and_deploys_nothing(tmp_path: Path):
    results = tmp_path
    params = yaml.safe_load((REPO / "params.yaml").read_text()) | {"models": ["spam_fnn"]}
    params["select"]["constraints"]["max_latency_ms"] = 0.5
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    folder = results / "reports" / "details" / "spam_fnn"  # the full records select reads
    folder.mkdir(parents=True)
    for name, data in {"onnx_fp32": metric(1.0), "onnx_opt": metric(0.6), "torch_eager": metric(2.0)}.items():
        (folder / f"{name}.json").write_text(data.model_dump_json(exclude_none=True))

    result = select_artifact("spam_fnn", load_params(tmp_path / "params.yaml"), tmp_path)

    assert result == {
        "status": "none",
        "reason": "no variant meets the constraints; closest: onnx_opt (0.6 > 0.5 ms (p50))",
    }
    record = json.loads((results / "reports" / "selection" / "spam_fnn.json").read_text())
    assert record["chosen"] == "none" and record["latency_ms"] is None
    manifest = json.loads((results / "deploy" / "spam_fnn" / "manifest.json").read_text())
    assert manifest["variant"] is None and manifest["selection"]["closest"] == "onnx_opt"
    assert set(manifest["selection"]["rejected"]) == {"onnx_fp32", "onnx_opt", "torch_eager"}
    with pytest.raises(ModelFileError, match="no artifact was chosen for spam_fnn: no variant meets"):
        load(results / "deploy" / "spam_fnn")


def test_one_select_builds_each_candidate_once_and_records_its_figures(tmp_path: Path, monkeypatch):
    """Screen, contest, manifest and record all read the candidates the screen built: one
    Candidate.from_record per measured variant, through a contest and a choice."""
    params = yaml.safe_load((REPO / "params.yaml").read_text()) | {"models": ["spam_fnn"]}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    folder = tmp_path / "reports" / "details" / "spam_fnn"
    folder.mkdir(parents=True)
    stored = {
        "onnx_fp32": metric(1.0, noise=5.0), "onnx_opt": metric(0.98, noise=5.0),
        "torch_eager": metric(2.0, size=0.5), "openvino_fp32": metric(1.0, status="failed"),
    }  # fmt: skip
    for name, data in stored.items():
        (folder / f"{name}.json").write_text(data.model_dump_json(exclude_none=True))

    def race(model, timed, params, root, baseline=None, **_):  # the stored figures, as if re-measured side by side
        ms = {v: stored[v].p50_ms for v in timed}
        leader = min(ms, key=ms.__getitem__)
        ratios = {v: {"ratio": ms[v] / ms[leader], "low": 1.01, "high": 1.04, "verdict": "slower"} for v in ms}
        del ratios[leader]
        return {"leader": leader, "ratio_to_leader": ratios, "latency_ms": ms, "percentile": "p50", "rounds": 9,
                "seconds": 1.0}  # fmt: skip

    built = []
    from_record = Candidate.from_record.__func__

    def counted(cls, variant, record, percentile):
        built.append(variant)
        return from_record(cls, variant, record, percentile)

    monkeypatch.setattr(Candidate, "from_record", classmethod(counted))
    monkeypatch.setattr(contest, "identical_groups", lambda variants, root, model: {v: [v] for v in variants})
    monkeypatch.setattr(contest, "measure_contenders", race)
    monkeypatch.setattr(deploy, "_package", lambda *args: {})  # no artifacts here to copy

    assert select_artifact("spam_fnn", load_params(tmp_path / "params.yaml"), tmp_path)["status"] == "ok"

    assert sorted(built) == ["onnx_fp32", "onnx_opt", "torch_eager"]  # the failed one is no candidate
    choice = records.load_choice("spam_fnn", tmp_path)
    assert choice is not None and choice.chosen == "onnx_opt" and choice.measured == "side by side with its contenders"
    assert set(choice.figures) == {"onnx_fp32", "onnx_opt", "torch_eager"}
    assert choice.figures["torch_eager"].latency_ms == 2.0 and choice.figures["torch_eager"].size_mb == 0.5
    assert choice.figures["onnx_opt"].feasible and choice.figures["onnx_opt"].loss == 0.0
    assert choice.rejected["openvino_fp32"] == "status failed: it broke"
    manifest = json.loads((tmp_path / "deploy" / "spam_fnn" / "manifest.json").read_text())
    assert set(manifest["selection"]["pareto_front"]) == set(choice.pareto_front)
    assert manifest["selection"]["not_applicable"] == choice.not_applicable and "tf_graph" in choice.not_applicable


def test_predict_on_a_folder_without_manifest_is_one_clear_error(tmp_path: Path):
    with pytest.raises(ModelFileError, match=r"manifest.json: not found \(is .* a deploy/<model> folder\?\)"):
        load(tmp_path)


def test_text_needs_a_deployed_tokenizer_and_labels_name_each_row(tmp_path: Path):
    import numpy as np

    from pipeline.serve.text import labelled, tokenize

    with pytest.raises(ModelFileError, match=r"--text needs a Hugging Face text model added with `add`"):
        tokenize(tmp_path, ["a film"], ["input_ids"])
    logits = {"logits": np.array([[0.0, 2.0], [3.0, 0.0]], dtype=np.float32)}
    named = labelled(
        logits, TextFacts(task="text-classification", tokenizer="tokenizer", labels={"0": "neg", "1": "pos"})
    )
    assert [label for label, _ in named] == ["pos", "neg"]
    assert named[0][1] == pytest.approx(np.exp(2) / (1 + np.exp(2)))
    assert [label for label, _ in labelled(logits, UNNAMED)] == [
        "1",
        "0",
    ]  # no names: the class index


def test_a_token_classifier_names_each_token_and_leaves_out_special_and_padding(tmp_path: Path):
    """`predict --text` on a token classifier: every word piece the tokenizer made, with its label name,
    no [CLS]/[SEP]/[PAD]; rows padded to the longest text keep their own tokens only."""
    import numpy as np
    import transformers

    from pipeline.serve.text import TOKENIZER, token_labelled, tokenize
    from tests.conftest import HF_WORDS

    transformers.BertTokenizer(vocab={word: i for i, word in enumerate(HF_WORDS)}).save_pretrained(tmp_path / TOKENIZER)
    texts = ["the film was good", "awful"]
    ids = tokenize(tmp_path, texts, ["input_ids"])["input_ids"]
    logits = np.zeros((*ids.shape, 3), dtype=np.float32)
    logits[..., 0] = 1.0
    logits[0, 4, 2] = 5.0  # "good" (after [CLS] the film was)
    logits[1, 1, 1] = 5.0  # "awful"
    tagged = token_labelled(
        tmp_path,
        ids,
        {"logits": logits},
        TextFacts(task="token-classification", tokenizer="t", labels={"0": "O", "1": "NEG", "2": "POS"}),
    )
    assert tagged == ["the/O film/O was/O good/POS", "awful/NEG"]
