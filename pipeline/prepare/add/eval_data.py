"""`add --eval`: held-out rows checked against the inferred inputs (an .npz), text tokenized by a
Hugging Face folder's own tokenizer (.txt, .jsonl), or text as it is for a model whose one input is text;
what the rows say goes into the entry: a scalar input's value, the symbolic axes they fix, integer
inputs' ranges, and labels that make it a classifier."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.core.config import BUILT_IN_METRICS
from pipeline.core.data import LABELS
from pipeline.core.errors import first_line
from pipeline.prepare.add.inferred import AddError, Inferred, Input
from pipeline.prepare.add.inspect.hugging_face import HF_DIR

EVAL_FILE = "eval.npz"


def with_eval(inferred: Inferred, eval_file: Path, metric: str | None, flags: dict[str, int] | None = None) -> None:
    """Check `--eval` against the inferred inputs (an .npz), or tokenize it (.txt: a text a line; .jsonl:
    {"text", "label"} rows) with a Hugging Face folder's own tokenizer; labels make it a classifier
    measured by accuracy. A symbolic axis no `--dim` set takes the data's size (take_data_dims)."""
    import numpy as np

    from pipeline.core.config import InputSpec
    from pipeline.core.inputs import dims_of, load_user_data, runtime_names

    entry = inferred.entry
    if entry.inputs is None:  # a decoder: no input specs to check rows against
        raise AddError(f"{eval_file}: --eval is not taken for a text-generation folder: set its eval_data by hand "
                       "(docs/text-generation.md)")  # fmt: skip
    if eval_file.suffix == ".npz":
        scalar_values(inferred, entry.inputs, eval_file)
    specs = {k: InputSpec.model_validate(v.as_yaml()) for k, v in entry.inputs.items()}
    texts = [name for name, spec in specs.items() if spec.dtype == "str"]
    if eval_file.suffix in (".txt", ".jsonl") and len(specs) == 1 and texts:  # strings in: the texts as they are
        data = as_strings(eval_file, texts[0])
        inferred.files[EVAL_FILE] = data
        inferred.scratch.append(data.parent)
    elif eval_file.suffix in (".txt", ".jsonl"):
        folder = inferred.files.get(HF_DIR)
        if folder is None or "input_ids" not in specs:
            raise AddError(f"{eval_file}: text eval data is for a Hugging Face text model or a model whose one "
                           "input is text; give an .npz of inputs")  # fmt: skip
        encoder = entry.task == "embedding"
        data = tokenized(eval_file, folder, list(specs), entry.dims["seq"], labelled=not encoder)
        if encoder and '"label"' in eval_file.read_text():
            inferred.notes.append(f"{eval_file.name}: labels ignored: an encoder's embeddings have no classes to score "
                                  "(fidelity and neighbour recall judge it)")  # fmt: skip
        inferred.files[EVAL_FILE] = data
        inferred.scratch.append(data.parent)
    elif eval_file.suffix == ".npz":
        inferred.files[EVAL_FILE] = eval_file
    else:
        raise AddError(f"{eval_file}: --eval takes an .npz of inputs by name (and optional `labels`), or text")
    loaded = load_user_data(inferred.files[EVAL_FILE], specs, "--eval")
    if eval_file.suffix == ".npz":
        with np.load(eval_file, allow_pickle=False) as data:
            renamed = runtime_names(list(data.files), specs)
        inferred.notes += [f"eval array {name!r} taken for input {input!r} (the name a runtime prints for its "
                           "tensor)" for name, input in renamed.items()]  # fmt: skip
    if eval_file.suffix == ".npz":  # text was tokenized to the entry's seq
        take_data_dims(inferred, dims_of(loaded.inputs, specs), flags or {})
        integer_ranges(inferred, entry.inputs, loaded.inputs)
    entry.eval_data = EVAL_FILE
    if not loaded.targets:
        if metric is not None:
            raise AddError(f"{eval_file}: --metric {metric} needs labels: a `labels` array, or arrays that are "
                           "no input")  # fmt: skip
        inferred.notes.append(f"eval data: {len(loaded)} rows, no labels: each output judged by its reading (below)")
        return
    named = ", ".join(f"{k} {list(v.shape)}" for k, v in loaded.targets.items())
    if LABELS not in loaded.targets and metric is None:  # labels only a user's metric can read
        inferred.notes.append(f"eval data: {len(loaded)} rows with labels ({named}) no built-in metric reads: each "
                              "output judged by its reading (below); --metric FILE.py:FUNCTION scores it")  # fmt: skip
        return
    if LABELS not in loaded.targets and metric in BUILT_IN_METRICS:
        raise AddError(f"{eval_file}: the built-in metric {metric} reads a `labels` array (found {named}): name "
                       "yours `labels`, or pass --metric FILE.py:FUNCTION")  # fmt: skip
    entry.labelled(metric or "accuracy")
    what = "a classifier, " if entry.task == "classification" else ""
    inferred.notes.append(f"eval data: {len(loaded)} labelled rows ({named}): {what}metric {entry.metric}")


def scalar_values(inferred: Inferred, inputs: dict[str, Input], eval_file: Path) -> None:
    """A scalar input's value from the eval data, where no --value gave it: one value for every row."""
    import numpy as np

    wanted = [n for n, spec in inputs.items() if not spec.shape and spec.value is None]
    if not wanted:
        return
    try:
        with np.load(eval_file, allow_pickle=False) as data:
            found = {name: data[name] for name in wanted if name in data.files}
    except (OSError, ValueError) as error:
        raise AddError(f"{eval_file}: not a readable .npz file ({first_line(error)})") from None
    for name, array in found.items():
        if not array.size or array.min() != array.max():
            spread = f"{array.min()} to {array.max()}" if array.size else "none"
            raise AddError(f"{eval_file}: array {name!r} must hold the scalar input's one value (it holds {spread})")
        value = array.reshape(-1)[0]
        inputs[name].value = float(value)
        inferred.notes = [
            f"{name}: a scalar input, {value} on every call (the eval data's)"
            if note.startswith(f"{name}: a scalar input") else note
            for note in inferred.notes
        ]  # fmt: skip


def integer_ranges(inferred: Inferred, inputs: dict[str, Input], rows: dict[str, Any]) -> None:
    """Integer inputs that are plain values (a byte, a category: no token kind, no bound yet) take the
    range the eval data holds, [min, max + 1): generated inputs stay in it and `predict` refuses a
    value outside it in one line (a byte value of 100000 was answered, exit 0)."""
    for name, spec in inputs.items():
        if not spec.shape or spec.kind != "values" or spec.high is not None or spec.low is not None:
            continue
        if spec.dtype.startswith(("int", "uint")) and rows[name].size:
            low, high = int(rows[name].min()), int(rows[name].max()) + 1
            spec.low, spec.high = low, high
            inferred.notes.append(
                f"{name}: integers in [{low}, {high}) (the eval data's range): predict refuses others"
            )


def take_data_dims(inferred: Inferred, found: dict[str, int], flags: dict[str, int]) -> None:
    """The eval data fixes every symbolic axis it holds: one `--dim` did not set takes the data's size
    (the entry's `dims` drops it, as eval data supplies it), so a default never contradicts the data."""
    dims = inferred.entry.dims
    for symbol, size in found.items():
        if symbol in dims and symbol not in flags:
            del dims[symbol]
            inferred.notes = [
                f"axis {symbol}: {size} from the eval data" if note.startswith(f"axis {symbol}:")
                or note.startswith(f"axis {symbol} (") else note
                for note in inferred.notes
            ]  # fmt: skip


def text_rows(text_file: Path) -> list[dict[str, Any]]:
    """The rows of a text eval file: .txt a text a line, .jsonl {"text", "label"} objects."""
    try:
        lines = [line for line in text_file.read_text().splitlines() if line.strip()]
        rows = [json.loads(line) for line in lines] if text_file.suffix == ".jsonl" else [{"text": t} for t in lines]
    except (OSError, ValueError) as error:
        raise AddError(f"{text_file}: not readable as {text_file.suffix} ({first_line(error)})") from None
    if not rows or any("text" not in row for row in rows):
        raise AddError(f'{text_file}: no rows, or a .jsonl row without "text"')
    return rows


def as_strings(text_file: Path, name: str) -> Path:
    """`text_file`'s texts as input `name` ([rows, 1] strings) and its integer labels, as an .npz beside a
    scratch copy: the eval rows of a model that takes text itself (a scikit-learn text pipeline)."""
    import tempfile

    import numpy as np

    rows = text_rows(text_file)
    arrays = {name: np.array([[str(row["text"])] for row in rows], dtype=str)}
    if any("label" in row for row in rows):
        if not all(isinstance(row.get("label"), int) for row in rows):
            raise AddError(f"{text_file}: a row without a label, or a label that is not an integer class")
        arrays["labels"] = np.array([row["label"] for row in rows], dtype=np.int64)
    out = Path(tempfile.mkdtemp(prefix="add-eval-")) / EVAL_FILE
    np.savez(out, **arrays)
    return out


def tokenized(text_file: Path, folder: Path, names: list[str], seq: int, labelled: bool = True) -> Path:
    """`text_file` tokenized by the folder's tokenizer (its own pad id and special tokens), padded and
    truncated to `seq`, as an .npz beside a scratch copy; labels from .jsonl rows ("label": an int, or
    a name of config.json's label2id) unless not `labelled` (an encoder: nothing to score them on)."""
    import tempfile

    import numpy as np
    from transformers import AutoTokenizer

    from pipeline.prepare.hf_folder import read_config

    rows = text_rows(text_file)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except Exception as error:
        raise AddError(f"{folder}: no usable tokenizer for the text eval data ({first_line(error)})") from None
    encoded = tokenizer([row["text"] for row in rows], padding="max_length", truncation=True, max_length=seq,
                        return_tensors="np")  # fmt: skip
    arrays = {name: encoded[name].astype(np.int64) for name in names}
    if labelled and any("label" in row for row in rows):
        label2id = read_config(folder).get("label2id") or {}
        try:
            arrays["labels"] = np.array([row["label"] if isinstance(row["label"], int) else label2id[row["label"]]
                                         for row in rows], dtype=np.int64)  # fmt: skip
        except KeyError as error:
            raise AddError(
                f"{text_file}: a row without a label, or label {error} not in config.json's label2id"
            ) from None
    out = Path(tempfile.mkdtemp(prefix="add-eval-")) / EVAL_FILE
    np.savez(out, **arrays)
    return out
