"""Run a deployment artifact: `python -m pipeline predict deploy/<model> INPUT`, or in Python:

    from pipeline.serve.predict import load
    predictor = load("deploy/spam_fnn")
    outputs = predictor({"features": x})        # or predictor(x) for a single-input model
    text = load("deploy/tiny_lm").generate("def read(path):", max_new_tokens=32)   # text-generation models
    outputs = predictor.on_text(["a fine film"])  # Hugging Face text models brought with `add`

The manifest says which runtime loads the artifact and how (its recorded runtime config); inputs
are checked against the input spec (names, shapes, dtypes, then values: token ids within the
vocabulary, 0/1 masks, finite floats), files against their sha256, before anything runs.
`load(folder, check_values=False)` skips the value checks for a caller that validates its own inputs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.data import Arrays, run_batched
from pipeline.core.errors import ModelFileError
from pipeline.core.files import sha256
from pipeline.core.inputs import by_input_name, check_input_values, check_inputs, outputs_to_model, rows_first
from pipeline.core.records import manifest as manifest_record
from pipeline.machine.fingerprint import cores
from pipeline.runtimes import load as load_runtime
from pipeline.runtimes.base import Session
from pipeline.serve.text import labelled, token_labelled, tokenize

NONFINITE_HINT = " (predict --allow-nonfinite, or load(..., allow_nonfinite=True), lets NaN and Inf through)"


class Predictor:
    """A loaded deployment artifact."""

    def __init__(
        self,
        folder: Path,
        threads: int | None = None,
        verify: bool = True,
        *,
        check_values: bool = True,
        allow_nonfinite: bool = False,
    ) -> None:
        self.folder, self.manifest = folder, manifest_record.load(folder)
        if not self.manifest.variant:
            why = self.manifest.selection.why
            raise ModelFileError(f"{folder}: no artifact was chosen for {self.manifest.model}: {why}")
        if verify:
            for name, digest in self.manifest.files.items():
                if not (folder / name).is_file() or sha256(folder / name) != digest:
                    raise ModelFileError(f"{folder / name}: missing or changed since selection (sha256 mismatch)")
        self.inputs = self.manifest.inputs
        # Each token input's vocabulary, recorded at deploy; a manifest from before has none, and then
        # only the checks that need no bound run (ids >= 0, masks, finite floats).
        self.bounds = self.manifest.token_bounds
        self.check_values, self.allow_nonfinite = check_values, allow_nonfinite
        config = self.manifest.runtime_config
        if self.manifest.code:
            config = config.model_copy(update={"code_root": str(folder / self.manifest.code)})
        self.session = load_runtime(
            self.manifest.runtime, folder / self.manifest.entry, threads or cores(), config, self.manifest.device
        )
        self.output_names = self.manifest.outputs

    def __call__(self, inputs: Arrays | np.ndarray, batch: int = 256, source: str = "inputs") -> Arrays:
        """Outputs by name; `source` names where the inputs came from in error messages.

        Any size fits a symbolic dimension (a sequence length, say); a model that fixes its batch
        is fed batches of exactly that size, the last one padded and the padding dropped."""
        return self.run(self.check(inputs, source), batch)

    def check(self, inputs: Arrays | np.ndarray, source: str = "inputs") -> Arrays:
        """The inputs rows first, after every check (names, shapes, dtypes, then values): one
        ModelFileError naming the array and the bound it broke."""
        if isinstance(inputs, np.ndarray):
            if len(self.inputs) != 1:
                names = ", ".join(self.inputs)
                raise ModelFileError(f"{source}: the model takes {len(self.inputs)} inputs ({names}); give an .npz")
            inputs = {next(iter(self.inputs)): inputs}
        checked = check_inputs(rows_first(by_input_name(inputs, self.inputs), self.inputs), self.inputs, source)
        if self.check_values:
            check_input_values(checked, self.inputs, source, self.bounds, self.allow_nonfinite, NONFINITE_HINT)
        return checked

    def run(self, checked: Arrays, batch: int = 256, session: Session | None = None) -> Arrays:
        """Outputs for inputs `check` passed, on `session` (a server's instance) or the predictor's own."""
        fixed = self.manifest.fixed_batch
        outputs = run_batched((session or self.session).run, checked, fixed or batch, fixed is not None)
        layout = self.manifest.runtime_config.layout
        axes = layout.outputs if layout else {}  # a state's batch axis
        return outputs_to_model({name: outputs[name] for name in self.output_names}, axes)

    def on_text(self, texts: list[str]) -> Arrays:
        """Outputs for raw text, tokenized by the model's own tokenizer (deployed beside it)."""
        return self(tokenize(self.folder, texts, list(self.inputs)), source="--text")

    def generate(self, prompt: str, max_new_tokens: int = 32) -> str:
        """Greedy continuation of `prompt` (text-generation models), cut at the end-of-text token."""
        from tokenizers import Tokenizer

        context = self.manifest.context
        if not context:
            raise ModelFileError(f"{self.manifest.model}: --prompt: not a text-generation model; give an input file")
        entry = self.folder / self.manifest.entry
        tokenizer = Tokenizer.from_file(str(entry / "tokenizer.json"))
        ids = tokenizer.encode(prompt).ids
        if not ids:
            raise ModelFileError("--prompt: empty: give some text to continue")
        if len(ids) + max_new_tokens > context:
            raise ModelFileError(
                f"--prompt: {len(ids)} tokens + {max_new_tokens} new exceed the model's context of {context} tokens"
            )
        tokens = self.session.generate(np.array([ids], dtype=np.int64), max_new_tokens).tokens[0].tolist()
        eos = self.manifest.eos_token_id
        if eos in tokens:
            tokens = tokens[: tokens.index(eos)]
        return tokenizer.decode(tokens)


def load(
    folder: str | Path,
    threads: int | None = None,
    verify: bool = True,
    *,
    check_values: bool = True,
    allow_nonfinite: bool = False,
) -> Predictor:
    """Load deploy/<model> with its runtime (threads default to all cores).

    Every call checks its inputs' values unless `check_values` is False (a caller that validates
    its own); `allow_nonfinite` lets NaN and Inf through and keeps the other value checks."""
    return Predictor(Path(folder), threads, verify, check_values=check_values, allow_nonfinite=allow_nonfinite)


def read_inputs(path: Path) -> Arrays | np.ndarray:
    """A .npy array (single-input models) or an .npz of arrays named like the inputs."""
    if not path.is_file():
        raise ModelFileError(f"{path}: file not found")
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as data:
                return {key: data[key] for key in data.files}
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise ModelFileError(f"{path}: not a readable .npy/.npz file ({error})") from None


def write_outputs(outputs: Arrays, path: Path) -> None:
    if path.suffix == ".npz":
        np.savez(path, **outputs)
    elif len(outputs) == 1:
        np.save(path, next(iter(outputs.values())))
    else:
        raise ModelFileError(f"{path}: the model has {len(outputs)} outputs; save them to an .npz file")


def describe(outputs: Arrays, rows: int = 5) -> str:
    lines = []
    for name, value in outputs.items():
        shown = np.array2string(value[:rows], precision=5, suppress_small=True, threshold=60)
        lines.append(f"{name}: shape {value.shape}, dtype {value.dtype}; first {min(rows, len(value))}:\n{shown}")
    return "\n".join(lines)


def run_cli(
    folder: Path,
    input_path: Path | None,
    output: Path | None,
    threads: int | None,
    prompt: str | None = None,
    max_new_tokens: int = 32,
    allow_nonfinite: bool = False,
    texts: list[str] | None = None,
) -> dict[str, Any]:
    if sum(given is not None for given in (input_path, prompt, texts)) != 1:
        raise ModelFileError(
            "predict: give one of an input file, --text TEXT (Hugging Face text models) or --prompt TEXT "
            "(text-generation models)"
        )
    predictor = load(folder, threads, allow_nonfinite=allow_nonfinite)
    manifest = predictor.manifest
    heading = f"{manifest.model}: {manifest.variant} on {manifest.runtime} {manifest.runtime_version}"
    if prompt is not None:
        text = predictor.generate(prompt, max_new_tokens)
        print(heading)
        print(prompt + text)
        return {"text": text}
    if texts is not None:
        inputs = tokenize(folder, texts, list(predictor.inputs))  # Predictor.on_text, keeping the ids
        outputs = predictor(inputs, source="--text")
        print(heading)
        text_facts = manifest.text
        task = text_facts.task if text_facts else None
        if text_facts and task == "text-classification" and not output:
            for text, (label, probability) in zip(texts, labelled(outputs, text_facts), strict=True):
                print(f"{label} ({probability:.3f}): {text}")
            return outputs
        if text_facts and task == "token-classification" and not output:
            for tagged in token_labelled(folder, inputs["input_ids"], outputs, text_facts):
                print(tagged)
            return outputs
    else:
        assert input_path is not None
        outputs = predictor(read_inputs(input_path), source=str(input_path))
        print(heading)
    if output:
        write_outputs(outputs, output)
        print(f"wrote {', '.join(outputs)} to {output}")
    else:
        print(describe(outputs))
    return outputs
