"""Text generation: decoders exported with their KV cache, the generation loop's figures, the bad inputs,
and `dvc repro` end to end on tiny decoders (a Llama, a GPT-2 the ONNX builder does not support, and a
masked LM that has no KV-cache path)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipeline.core.errors import ModelFileError
from tests.conftest import copy_project, write_params
from tests.helpers import FAST_CONTEST
from tests.pipeline_runs import commit_and_repro, init_project

# Through dvc repro: each decoder backend (transformers, onnxruntime-genai's builder, optimum-intel's export) at
# FP32 and at INT4, its most compressed form; the INT8 and FP16 variants are the same passes at another precision
LM_VARIANTS = ["lm_torch", "lm_onnx_fp32", "lm_onnx_int4", "lm_openvino_fp32", "lm_openvino_int4"]
FAST_GENERATION = {"prompt_lengths": [4, 8], "new_tokens": 4, "batches": [1, 2], "context": 24, "repeats": 2,
                   "quality_rows": 4}  # fmt: skip
TEXT = " ".join(
    ["Return the absolute path of the file, resolving every symbolic link on the way."] * 3
    + ["Open the file and return a stream; raise an error if the file cannot be opened."] * 3
)


def tokenizer():
    from models.common.text import train_tokenizer

    return train_tokenizer([TEXT], vocab_size=300)


def write_decoder(folder: Path, kind: str = "llama", rows: int = 6, seq: int = 16) -> Path:
    """A Hugging Face folder of a seeded tiny causal LM (or a masked LM: kind 'bert'), its tokenizer and
    eval.npz (windows of token ids)."""
    import torch
    import transformers

    torch.manual_seed(0)
    common = {"vocab_size": 300, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}
    if kind == "llama":
        config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2,
                                          max_position_embeddings=64, **common)  # fmt: skip
        model = transformers.LlamaForCausalLM(config)
    elif kind == "gpt2":
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=64,
                                                                     **common))  # fmt: skip
    else:
        model = transformers.BertForMaskedLM(transformers.BertConfig(hidden_size=32, num_hidden_layers=1,
                                                                     num_attention_heads=2, intermediate_size=64,
                                                                     **common))  # fmt: skip
    model.save_pretrained(folder / "hf")
    tokens = tokenizer()
    tokens.save_pretrained(folder / "hf")
    ids = np.array(tokens(TEXT * 4)["input_ids"][: rows * seq], dtype=np.int64).reshape(rows, seq)
    np.savez(folder / "eval.npz", input_ids=ids)
    return folder


GPT2_FACTORY = """
import transformers

from models.common.text import train_tokenizer


def build():
    config = transformers.GPT2Config(vocab_size=300, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                                     bos_token_id=0, eos_token_id=0, pad_token_id=0)
    return transformers.GPT2LMHeadModel(config), train_tokenizer(["some text to learn a vocabulary from"] * 9, 300)
"""


def run(cmd: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if check:
        assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


# --- fast: the export's checks and the generation loop on one tiny decoder -------------------------


def test_a_masked_lm_has_no_kv_cache_path(tmp_path):
    """transformers loads BERT as BertLMHeadModel for causal LM: it runs, but caches nothing."""
    from pipeline.prepare.decoder import load_causal_lm, require_kv_cache

    folder = write_decoder(tmp_path, "bert")
    model = load_causal_lm(folder / "hf", "catalog.m.file")
    with pytest.raises(ModelFileError, match=r"no KV-cache path.*\(params.yaml: catalog.m.file\)"):
        require_kv_cache(model, folder / "hf", "catalog.m.file")


def test_a_folder_that_is_not_a_model_gets_one_line(tmp_path):
    from pipeline.prepare.decoder import load_causal_lm

    with pytest.raises(ModelFileError, match=r"no config.json: not a Hugging Face model folder"):
        load_causal_lm(tmp_path, "catalog.m.file")
    (tmp_path / "config.json").write_text('{"model_type": "no_such_architecture"}')
    with pytest.raises(ModelFileError, match=r"not a causal language model \(params.yaml: catalog.m.file\)"):
        load_causal_lm(tmp_path, "catalog.m.file")


def test_a_decoder_without_a_kv_cache_path_gets_one_line():
    import torch

    from pipeline.prepare.decoder import require_kv_cache

    class NoCache(torch.nn.Module):
        config = type("Config", (), {"vocab_size": 50})()

        def forward(self, input_ids, use_cache=False, past_key_values=None):
            return type("Out", (), {"logits": torch.zeros(1, input_ids.shape[1], 50), "past_key_values": None})()

    with pytest.raises(ModelFileError, match=r"no KV-cache path.*catalog\.m\.file"):
        require_kv_cache(NoCache(), Path("models/m/hf"), "catalog.m.file")


def test_the_kv_cache_path_of_a_real_decoder_matches_its_full_pass(tmp_path):
    from pipeline.prepare.decoder import load_causal_lm, require_kv_cache

    folder = write_decoder(tmp_path, "llama")
    assert require_kv_cache(load_causal_lm(folder / "hf", "f"), folder, "f").startswith("ok")


def test_prompts_longer_than_the_context_are_refused():
    from pipeline.measure.generation import require_context

    require_context(64, 64, "bench.generation.context")
    with pytest.raises(ValueError, match=r"bench\.generation\.context: 65 tokens exceed the model's context of 64"):
        require_context(65, 64, "bench.generation.context")


def test_the_generation_loop_times_every_token_and_scores_quality(tmp_path):
    from pipeline.core.config import GenerationBench
    from pipeline.measure.generation import quality, timed_runs
    from pipeline.prepare.decoder import load_causal_lm, reference_outputs
    from pipeline.runtimes.lm_torch import TorchGenerator

    folder = write_decoder(tmp_path, "llama")
    ids = np.load(folder / "eval.npz")["input_ids"]
    generator = TorchGenerator(folder / "hf", threads=1)
    settings = GenerationBench(new_tokens=5, repeats=3)
    runs = timed_runs(generator, ids, length=8, batch=2, settings=settings)
    assert len(runs["first_s"]) == 3 and len(runs["step_s"]) == 3 * 4  # every token after the first, each run
    assert all(s > 0 for s in runs["step_s"] + runs["first_s"] + runs["decode_s"])
    reference = reference_outputs(load_causal_lm(folder / "hf", "f"), ids)
    same = quality(generator, reference, ids)
    assert same["perplexity"]["increase_pct"] == pytest.approx(0, abs=1e-3)  # float32 logits vs float64 sums
    assert same["fidelity"]["logits"]["top1_agreement"] == 1.0
    assert same["fidelity"]["logits"]["cosine_min"] == pytest.approx(1.0)
    broken = {**reference, "top1": (reference["top1"] + 1) % 300, "logits": -reference["logits"]}
    scored = quality(generator, broken, ids)  # a variant that answers differently everywhere
    assert scored["fidelity"]["logits"]["top1_agreement"] == 0.0
    assert scored["fidelity"]["logits"]["cosine_min"] < 0


# --- slow: the pipeline on tiny decoders ---------------------------------------------------------


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """Three tiny decoders through `dvc repro`: slow (about 2 minutes on 2 cores) for the converters
    (onnxruntime-genai's builder, optimum-intel's export with NNCF's weight compression) and a
    generation loop timed per token for each variant; every slow test here reads this one project."""
    root = copy_project(tmp_path_factory.mktemp("generation") / "project")
    params = yaml.safe_load((root / "params.yaml").read_text())
    models = {"llama": "tiny_llama", "gpt2": "tiny_gpt2", "bert": "masked_lm"}
    params["models"] = list(models.values())
    params["train"], params["catalog"] = {}, {}
    for kind, name in models.items():
        write_decoder(root / "models" / name, kind)
        params["catalog"][name] = {"source": "transformers", "task": "text-generation", "file": "hf",
                                   "eval_data": "eval.npz"}  # fmt: skip
    # GPT-2 comes as code: a seeded factory returning the model and its tokenizer, no eval data
    (root / "models" / "tiny_gpt2" / "net.py").write_text(GPT2_FACTORY)
    params["catalog"]["tiny_gpt2"] = {"source": "transformers", "task": "text-generation",
                                      "factory": "models.tiny_gpt2.net:build", "init_seed": 0}  # fmt: skip
    # GPT-2 covers the builder's refusal and OpenVINO's conversion of another architecture
    params["catalog"]["tiny_gpt2"]["skip"] = ["lm_onnx_fp32", "lm_openvino_fp32"]
    params["bench"]["threads"] = 1
    params["bench"]["generation"] = FAST_GENERATION
    params["select"]["contest"] = FAST_CONTEST
    for group in ("variants", "machine_variants"):  # only the text-generation variants: the others skip
        params[group] = {k: v for k, v in params[group].items() if k in LM_VARIANTS}
    write_params(root, params)  # and the variants' stage files
    init_project(root)
    commit_and_repro(root)
    return root


def details(root: Path, model: str, variant: str) -> dict:
    return json.loads((root / "reports" / "details" / model / f"{variant}.json").read_text())


@pytest.mark.slow
def test_every_decoder_variant_writes_generation_metrics(project):
    """Slow (its project, about 90 s: every decoder variant built and measured through DVC). The only test that
    each text-generation variant writes its generation metrics (TTFT, TPOT, perplexity, agreement)."""
    for variant in LM_VARIANTS:
        record = details(project, "tiny_llama", variant)
        assert record["status"] == "ok", (variant, record["reason"])
        generation = record["generation"]
        assert set(generation["ttft_ms"]) == {"p4", "p8"} and all(v > 0 for v in generation["ttft_ms"].values())
        assert set(generation["tokens_per_s"]) == {"b1", "b2"}
        assert 0 < record["latency_ms"]["p50"] <= record["latency_ms"]["p90"]
        assert record["latency_ms"]["n"] == 2 * (FAST_GENERATION["new_tokens"] - 1)
        assert record["footprint_mb"] > 0 and generation["context_footprint_mb"] > 0
        logits = record["fidelity"]["logits"]
        assert 0.5 < logits["top1_agreement"] <= 1 and 0.9 < logits["cosine_min"] <= 1 + 1e-6
        tracked = json.loads((project / "reports" / "metrics" / "tiny_llama" / f"{variant}.json").read_text())
        assert {"ttft_ms", "tpot_p90_ms", "ppl_increase_pct", "top1_agreement"} <= set(tracked)
    for exact in ("lm_torch", "lm_onnx_fp32", "lm_openvino_fp32"):  # FP32 everywhere: the source's own answers
        record = details(project, "tiny_llama", exact)
        assert record["fidelity"]["logits"]["top1_agreement"] == 1.0, exact
        assert abs(record["perplexity"]["increase_pct"]) < 0.01, exact
    assert details(project, "tiny_llama", "lm_openvino_fp32")["runtime_settings"]["plugin_chose"] == {
        "INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"}  # fmt: skip
    assert (
        details(project, "tiny_llama", "lm_onnx_int4")["size_mb"]
        < details(project, "tiny_llama", "lm_onnx_fp32")["size_mb"]
    )


@pytest.mark.slow
def test_exports_carry_the_kv_cache(project):
    """Slow (its project, about 90 s: every decoder variant built and measured through DVC). The only test that
    each text-generation variant writes its generation metrics (TTFT, TPOT, perplexity, agreement)."""
    import onnx

    graph = onnx.load(project / "artifacts" / "tiny_llama" / "lm_onnx_fp32" / "model.onnx", load_external_data=False)
    inputs, outputs = {i.name for i in graph.graph.input}, {o.name for o in graph.graph.output}
    assert {"past_key_values.0.key", "past_key_values.1.value"} <= inputs
    assert {"logits", "present.0.key", "present.1.value"} <= outputs
    int4 = onnx.load(project / "artifacts" / "tiny_llama" / "lm_onnx_int4" / "model.onnx", load_external_data=False)
    assert any(node.op_type == "MatMulNBits" for node in int4.graph.node)
    import openvino as ov

    stateful = ov.Core().read_model(project / "artifacts" / "tiny_llama" / "lm_openvino_int4" / "openvino_model.xml")
    assert {p.get_any_name() for p in stateful.inputs} == {"input_ids", "attention_mask", "position_ids", "beam_idx"}
    assert len(stateful.get_sinks()) == 2 * 2  # a key and a value state per layer


@pytest.mark.slow
def test_bad_decoders_fail_or_skip_alone_with_one_line(project):
    """Slow (its project, about 90 s: every decoder variant built and measured through DVC). The only test that
    each text-generation variant writes its generation metrics (TTFT, TPOT, perplexity, agreement)."""
    for variant in ("lm_onnx_int4",):  # the builder does not know GPT-2: skipped, the others run
        record = details(project, "tiny_gpt2", variant)
        assert record["status"] == "skipped" and "not currently supported" in record["reason"], record["reason"]
    for variant in ("lm_torch", "lm_openvino_int4"):
        assert details(project, "tiny_gpt2", variant)["status"] == "ok", variant
    assert details(project, "tiny_gpt2", "lm_torch")["eval_origin"].startswith("random token ids")
    masked = details(project, "masked_lm", "lm_torch")
    assert masked["status"] == "failed" and "no KV-cache path" in masked["reason"]
    assert "\n" not in masked["reason"]


@pytest.mark.slow
def test_predict_generates_text_from_the_deployed_decoder(project):
    """Slow (its project, about 90 s: every decoder variant built and measured through DVC). The only test that
    each text-generation variant writes its generation metrics (TTFT, TPOT, perplexity, agreement)."""
    selection = json.loads((project / "reports" / "selection" / "tiny_llama.json").read_text())
    assert selection["chosen"] in LM_VARIANTS and selection["ppl_increase_pct"] <= 2
    command = [sys.executable, "-m", "pipeline", "predict", "deploy/tiny_llama", "--max-new-tokens", "6"]
    done = run([*command, "--prompt", "Return the absolute"], project)
    assert "Return the absolute" in done.stdout and selection["chosen"] in done.stdout
    long = run([*command, "--prompt", "path " * 80], project, check=False)
    assert long.returncode == 2 and "exceed the model's context of 64 tokens" in long.stderr
    report = (project / "reports" / "report" / "tiny_llama.md").read_text()
    assert "TPOT p50 ms" in report and "img/tiny_llama/tpot_size.png" in report
