"""End to end on the other source frameworks: a Keras model and a JAX (Flax) model of the zoo, trained
small, through `dvc repro` to ONNX and their own runtimes (TensorFlow graph and XLA, jax.jit
and jax.export), each deployed and run by `predict`. Its own project, so a second test worker builds it
beside tests/test_e2e.py's. Slow (about 2 minutes on 2 cores): two trainings, two exports through
tf2onnx and jax2onnx, and TensorFlow's and JAX's XLA compilation at every load."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import copy_project, write_params
from tests.helpers import FAST_BENCH, FAST_CONTEST
from tests.pipeline_runs import (
    UNCHECKED,
    commit_and_repro,
    init_project,
    keeping,
    metrics,
    pinned_deploy_predicts,
    read,
)

pytestmark = pytest.mark.slow

MODELS = ["digits_keras", "digits_jax"]
# Each source's export (onnx_fp32) and its own runtimes; the ONNX and OpenVINO passes are tests/test_e2e.py's
KEPT = ["onnx_fp32", "tf_graph", "tf_xla", "jax_jit", "jax_xla"]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = copy_project(tmp_path_factory.mktemp("frameworks") / "project")
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["models"] = MODELS
    params["train"] = {name: params["train"][name] | {"epochs": 3} for name in MODELS}
    for name in MODELS:
        params["catalog"][name]["skip"] = keeping(params["catalog"][name]["source"], *KEPT)
    params["bench"], params["serving"] = FAST_BENCH, UNCHECKED
    params["select"]["contest"] = FAST_CONTEST
    params["targets"] = ["cpu"]
    params["gpu_variants"] = {}
    params["export"]["max_eval_samples"] = 500
    params["variants"] = {k: v for k, v in params["variants"].items() if not k.startswith("lm_")}
    write_params(root, params)
    init_project(root)
    return root, commit_and_repro(root)


@pytest.mark.parametrize(
    ("model", "native"), [("digits_keras", ["tf_graph", "tf_xla"]), ("digits_jax", ["jax_jit", "jax_xla"])]
)
def test_keras_and_jax_sources_reach_onnx_and_xla(project, model, native):
    """Slow (its project, about 90 s: Keras and JAX models through `dvc repro`). The only test that a Keras and
    a JAX source reach ONNX with export parity and their native XLA variants through DVC."""
    root, _ = project
    export = json.loads((root / "reports" / "export" / f"{model}.json").read_text())
    assert export["status"] == "ok" and export["parity"] == "ok"
    for variant in ["onnx_fp32", *native]:
        m = metrics(root, model, variant)
        assert m["status"] == "ok", (variant, m["reason"])
        assert abs(m["accuracy"]["delta"]) <= 0.01 and m["fidelity"]["logits"]["top1_agreement"] > 0.98
        assert m["latency_ms"]["p50"] > 0 and m["load_ms"] > 0
    for variant in ("torch_eager", "onnx_int8_static"):  # another source kind; the model's `skip`: no stages
        assert not (root / "reports" / "details" / model / f"{variant}.json").exists()
    choice = read(root / "reports" / "selection" / f"{model}.json")
    left_out = choice["not_applicable"]
    assert "catalog." in left_out["onnx_int8_static"] and "needs a torch source" in left_out["torch_eager"]


@pytest.mark.parametrize(("model", "variant"), [("digits_keras", "tf_xla"), ("digits_jax", "jax_xla")])
def test_every_runtime_deploys_and_predicts(project, tmp_path, model, variant):
    """One variant per runtime (tensorflow, jax): its compiled form, since a graph or jit variant is the
    same adapter loading the same kind of artifact."""
    pinned_deploy_predicts(project[0], tmp_path / "side", model, variant)


def test_a_project_that_builds_only_the_variants_its_tests_read_still_passes_check(project):
    """Each model here skips every variant no test reads (`skip`, from KEPT): the entries stay valid, and
    `python -m pipeline check` opens every model's files and finds nothing to say."""
    import sys

    from tests.pipeline_runs import run

    root, _ = project
    entries = yaml.safe_load((root / "params.yaml").read_text())["catalog"]
    assert all(entries[name]["skip"] for name in MODELS)
    run([sys.executable, "-m", "pipeline", "check"], root)  # exits 0
