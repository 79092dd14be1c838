"""A SavedModel whose serving signature takes and gives text (tf.string), as a TF Estimator exports a classifier
(guesslang's: one STRING input, float scores beside STRING class names): `add` writes the input as `str`, the
source and the tf_graph variant answer with text ('<U', never bytes objects), and a STRING output is judged by
equality, row by row, with no tolerance."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline import runtimes
from pipeline.core.config import Constraints, ModelConfig
from pipeline.core.evaluate import Judging
from pipeline.core.quality import output_violations
from pipeline.core.records import OutputFidelity
from pipeline.prepare.sources import load_source
from tests.test_add import params_of, project, run_add  # noqa: F401 - `project` is a fixture

SNIPPETS = np.array(["def f(x):\n    return x", "int main() { return 0; }", "SELECT 1;", "print('hi')"])


def write_text_classifier(folder):
    """folder/text_model: scores [N, 2] from each text's length, and the class name of the larger one (STRING)."""
    import tensorflow as tf

    class TextClassifier(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="content")])
        def serve(self, content):
            length = tf.cast(tf.strings.length(content), tf.float32)
            long = tf.sigmoid((length - 18.0) / 4.0)
            scores = tf.stack([1.0 - long, long], axis=1)
            names = tf.constant(["short", "long"])
            return {"scores": scores, "classes": tf.gather(names, tf.argmax(scores, axis=1))}

    module = TextClassifier()
    path = folder / "text_model"
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return path


def test_a_string_savedmodel_goes_in_and_runs_in_tensorflow_with_text_out(project, tmp_path, monkeypatch, capsys):  # noqa: F811
    path = write_text_classifier(tmp_path)
    assert run_add(project, monkeypatch, "lang", str(path)) == 0
    capsys.readouterr()
    entry = params_of(project)["catalog"]["lang"]
    assert entry["source"] == "savedmodel" and entry["inputs"] == {"content": {"shape": ["batch"], "dtype": "str"}}
    source = load_source("lang", ModelConfig.model_validate(entry), project)
    got = source.predict({"content": SNIPPETS})
    assert got["classes"].dtype.kind == "U" and got["classes"].tolist() == ["long", "long", "short", "short"]
    served = tmp_path / "served"
    source.serving_module(jit=False).save(served)  # what the tf_graph variant writes
    session = runtimes.load("tensorflow", served, 1, {})
    again = session.run({"content": SNIPPETS})
    assert again["classes"].tolist() == got["classes"].tolist()
    assert np.allclose(again["scores"], got["scores"])


def test_a_string_output_is_judged_by_equality_row_by_row():
    reference = np.array([["python", "c"], ["sql", "go"], ["rust", "java"]])
    changed = reference.copy()
    changed[1, 1] = "c"
    kept = Judging().read(0, "classes", reference, reference.copy())
    assert kept["output_kind"] == "strings" and kept["sequences_kept"] == 1.0 and kept["decision_flips"] == 0
    moved = OutputFidelity.model_validate(Judging().read(0, "classes", reference, changed))
    assert moved.sequences_kept == 2 / 3 and moved.decides and moved.score == 2 / 3
    (found,) = output_violations("classes", moved, Constraints())
    assert found.constraint == "strings_equal" and "1 rows' strings differ" in found.message


def test_an_export_onnx_cannot_run_skips_the_onnx_variants_naming_what_the_converter_left(tmp_path):
    """tf2onnx leaves TF's StringLength unconverted, even with onnxruntime-extensions' operators offered (and writes
    StringSplit, an opset-20 operator, into opset-18 graphs): ONNX Runtime would refuse the file, so the export
    says which operators and every ONNX variant is skipped, not applicable, with that reason."""
    import shutil

    import onnx
    from onnx import TensorProto, helper

    from pipeline.core import onnx_files
    from pipeline.core.config import ExportConfig
    from pipeline.core.errors import NotApplicable

    (tmp_path / "models" / "lang").mkdir(parents=True)
    shutil.copytree(write_text_classifier(tmp_path), tmp_path / "models" / "lang" / "text_model")
    config = ModelConfig(
        source="savedmodel", file="text_model", inputs={"content": {"shape": ["batch"], "dtype": "str"}}
    )
    with pytest.raises(NotApplicable, match=r"opset 18: StringLength: no ONNX variant"):
        load_source("lang", config, tmp_path).export_onnx(tmp_path / "model.onnx", ExportConfig())

    def graph(op: str, opset: int) -> onnx.ModelProto:
        node = helper.make_node(op, ["x"], ["y"])
        io = [helper.make_tensor_value_info(n, TensorProto.STRING, ["batch"]) for n in ("x", "y")]
        return helper.make_model(
            helper.make_graph([node], "g", io[:1], io[1:]), opset_imports=[helper.make_opsetid("", opset)]
        )

    assert onnx_files.unknown_operators(graph("StringSplit", 18)) == {"StringSplit": 1}
    assert not onnx_files.unknown_operators(graph("StringSplit", 20))  # defined from opset 20
    assert onnx_files.unknown_operators(graph("RFFT2D", 20)) == {"RFFT2D": 1}


def test_text_operators_convert_to_onnxruntime_extensions_and_run_where_the_onnx_variants_do(tmp_path):
    """A hashing text classifier (TF's StaticRegexReplace and StringToHashBucketFast, as a bag-of-words model
    hashes its tokens): tf2onnx writes them as onnxruntime-extensions' operators, which every ONNX Runtime session
    the pipeline opens reads (export's parity check, the runtime, `predict`). Whether they answer as TensorFlow
    does is the fidelity check's to say: with onnxruntime-extensions 0.15 they do not (its hash differs from TF's
    Fingerprint64 bucketing and its regex replaced nothing here), and the judging says so row by row."""
    import tensorflow as tf

    from pipeline.core import onnx_files
    from pipeline.core.config import ExportConfig

    class Hashing(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="content")], autograph=False)
        def serve(self, content):
            bucket = tf.strings.to_hash_bucket_fast(tf.strings.regex_replace(content, "[0-9]", "#"), 8)
            weights = tf.constant(np.random.default_rng(0).normal(size=(8, 2)).astype("float32"))
            scores = tf.nn.softmax(tf.gather(weights, bucket), axis=1)
            return {"scores": scores, "classes": tf.gather(tf.constant(["prose", "code"]), tf.argmax(scores, axis=1))}

    module = Hashing()
    (tmp_path / "models" / "hashing").mkdir(parents=True)
    folder = tmp_path / "models" / "hashing" / "m"
    tf.saved_model.save(module, str(folder), signatures={"serving_default": module.serve})
    config = ModelConfig(source="savedmodel", file="m", inputs={"content": {"shape": ["batch"], "dtype": "str"}})
    source = load_source("hashing", config, tmp_path)
    source.export_onnx(tmp_path / "model.onnx", ExportConfig())
    import onnx

    graph = onnx.load(str(tmp_path / "model.onnx"))
    assert {n.op_type for n in graph.graph.node if n.domain == onnx_files.CONTRIB_DOMAIN} == {
        "StringRegexReplace",
        "StringToHashBucketFast",
    }
    assert not onnx_files.unknown_operators(graph)
    rows = np.array([*SNIPPETS, "abc 123", "x = 42"])
    reference = source.predict({"content": rows})
    got = runtimes.load("onnxruntime", tmp_path / "model.onnx", 1, {}).run({"content": rows})
    assert got["scores"].shape == (len(rows), 2)
    judged = Judging().read(0, "classes", reference["classes"], got["classes"])
    differ = int((reference["classes"] != got["classes"].astype(str)).sum())
    print(f"{differ} of {len(rows)} rows' classes differ from TensorFlow's")
    assert judged["output_kind"] == "strings" and judged["decision_flips"] == differ
