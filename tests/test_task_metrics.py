"""The task metric: built-ins on a maintained library, a user's function from the model's folder, and one
line naming a metric that raises, returns no number or runs too long."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pipeline.core import task_metrics
from pipeline.core.data import DataSet
from pipeline.core.inputs import load_user_data
from pipeline.core.records import Accuracy
from pipeline.core.task_metrics import BUILT_IN, MetricError, TaskMetric, accuracy_block, ctc_greedy, resolve


def test_f1_reads_multi_label_decisions_at_one_half():
    labels = np.array([[1, 0, 1], [0, 1, 0]])
    outputs = {"tags": np.array([[0.9, 0.2, 0.4], [0.1, 0.8, 0.7]])}  # one missed, one false alarm: 2 of 3 kept
    assert BUILT_IN["f1"](outputs, {"labels": labels}) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))


def test_cer_decodes_ctc_logits_greedily_against_label_ids():
    def logits(*best: int) -> np.ndarray:
        out = np.zeros((len(best), 6))
        out[np.arange(len(best)), best] = 5.0
        return out

    assert ctc_greedy(logits(0, 3, 3, 0, 3, 5)[None]) == [[3, 3, 5]]  # repeats merged, blank 0 between keeps both
    outputs = {"387": np.stack([logits(2, 2, 0, 4, 0), logits(1, 0, 1, 0, 5)])}  # "2 4" and "1 1 5"
    labels = {"labels": np.array([[2, 4, -1], [1, 3, 5]])}  # "2 4" and "1 3 5": one substitution in five
    cer = BUILT_IN["cer"]
    assert not cer.higher_is_better and cer(outputs, labels) == pytest.approx(1 / 5)
    rise = Accuracy(metric="cer", higher_is_better=False, source_value=0.1, value=0.15, delta=0.05)
    assert rise.drop == pytest.approx(0.05)  # an error rate that rises is a drop


def test_a_users_metric_reads_labels_by_name_and_says_which_way_is_better(tmp_path: Path, monkeypatch):
    folder = tmp_path / "models" / "tagger"
    folder.mkdir(parents=True)
    (tmp_path / "models" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))  # this project's models/, not the repository's
    for name in [m for m in sys.modules if m == "models" or m.startswith("models.")]:
        monkeypatch.delitem(sys.modules, name)
    (folder / "metric.py").write_text(
        textwrap.dedent('''
        import numpy as np

        def onset_errors(outputs, labels):
            """Missed and false onsets per labelled onset: the notes file's own array."""
            found = outputs["onset"] >= 0.5
            return float(np.sum(found != labels["onsets"].astype(bool)) / labels["onsets"].sum())

        onset_errors.higher_is_better = False
    ''')
    )
    metric = resolve("models.tagger.metric:onset_errors", "tagger", tmp_path)
    assert metric is not None and not metric.higher_is_better and metric.reads_every_output
    onsets = np.array([[1, 0, 0, 1], [0, 1, 0, 0]])
    reference, variant = {"onset": onsets * 0.9 + 0.05}, {"onset": np.array([[0.9, 0.6, 0.1, 0.9], [0.1] * 4])}
    block = accuracy_block(metric, {"onsets": onsets}, reference, variant)
    assert block["source_value"] == 0.0 and block["value"] == pytest.approx(2 / 3) and block["delta"] > 0
    assert resolve("none", "tagger", tmp_path) is None and resolve("cer", "tagger", tmp_path) is BUILT_IN["cer"]


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (lambda outputs, labels: 1 / 0, "metric broken raised ZeroDivisionError: division by zero"),
        (lambda outputs, labels: None, "metric broken returned NoneType, not a number"),
        (lambda outputs, labels: float("nan"), "metric broken returned nan"),
    ],
)
def test_a_metric_that_raises_or_returns_no_number_is_one_line_naming_it(function, message):
    with pytest.raises(MetricError, match=f"^{message}"):
        TaskMetric("broken", function)({"y": np.zeros((2, 2))}, {"labels": np.zeros(2)})


def test_a_slow_metric_is_stopped(monkeypatch: pytest.MonkeyPatch):
    import threading

    release = threading.Event()
    monkeypatch.setattr(task_metrics, "METRIC_TIMEOUT_S", 0.2)
    with pytest.raises(MetricError, match=r"metric slow: no result after 0\.2 s"):
        TaskMetric("slow", lambda outputs, labels: release.wait(5))({"y": np.zeros(1)}, {})
    release.set()


def test_eval_data_keeps_every_array_that_is_not_an_input_as_labels(tmp_path: Path):
    from pipeline.core.config import InputSpec

    specs = {"x": InputSpec(shape=["batch", 3], dtype="float32")}
    path = tmp_path / "eval.npz"
    texts = np.array(["a cat", "a dog"])
    np.savez(path, x=np.zeros((2, 3), np.float32), labels=np.array([0, 1]), text=texts)
    loaded = load_user_data(path, specs, "catalog.m.eval_data")
    assert set(loaded.targets) == {"labels", "text"} and list(loaded.targets["text"]) == ["a cat", "a dog"]
    loaded.outputs = {"y": np.ones((2, 1))}
    loaded.save(tmp_path / "ref.npz")
    again = DataSet.load(tmp_path / "ref.npz").take(np.array([1]), "one row")
    assert list(again.targets["text"]) == ["a dog"] and again.labels.tolist() == [1]
