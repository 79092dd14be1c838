"""`python -m pipeline add NAME PATH`: a model in one command.

The file already says what a catalog entry spells out. From an ONNX graph: each input's name,
dtype, fixed and symbolic dims (a fixed first dim is a fixed batch), token inputs (integer inputs
named like `input_ids`, `attention_mask`, `token_type_ids`) with their vocabulary where the graph
tells it (the rows of the embedding table the ids index) or a config.json beside the file does,
and whether it is already quantized. From a Hugging Face folder: the task (config.json's
`architectures`) and the inputs its config implies (pipeline.prepare.hf_folder builds it). From a
`.keras` file: its input layers; from a SavedModel folder, or a PyTorch or JAX factory in a .py file
with its weights and the input flags: pipeline.prepare.add_code. The command writes models/NAME/ (the file, its external
weights, `--eval` data), the entry and NAME in `models` (params.yaml's comments kept), checks them
as `python -m pipeline check` would and versions the model files with `dvc add` (git gets the small
.dvc file, DVC's cache the weights); the command then writes the stage files and prints what it inferred.

Nothing is half-written: the folder is built aside and moved in, params.yaml is replaced in one
rename once everything passed, and a failure removes what was made. Every problem is one line naming
the path and what is wrong (pipeline.core.errors.PipelineError).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from pipeline.core.config import MODELS_DIR, PARAMS_FILE, load_params, model_dir
from pipeline.core.errors import ModelFileError, PipelineError, first_line
from pipeline.prepare.inferred import (
    DEFAULT_DIM,
    NAME,
    AddError,
    Flags,
    Inferred,
    axes_notes,
    spec_shape,
    symbol_of,
    token_kind,
)
from pipeline.serve.text import HF_FOLDER_FACTORY

EVAL_FILE = "eval.npz"
HF_DIR = "hf"  # a Hugging Face folder's place inside models/NAME/
CODE_SOURCES = ("torch", "jax")  # a factory's entry: proven by building the model, as the export stage will


def inspect_onnx(path: Path, dims: dict[str, int], vocab: int | None, flags: Flags | None = None) -> Inferred:
    """The catalog entry an ONNX file implies; `dims` and `vocab` are the user's flags (--dim, --vocab),
    `flags` the rest (--value for scalar inputs, --batch-axis)."""
    flags = flags or Flags()
    import onnx

    from pipeline.core import onnx_files
    from pipeline.prepare.check import non_tensor_output
    from pipeline.prepare.sources.onnxfile import (
        ONNX_DTYPES,
        graph_inputs,
        input_dims,
        onnx_ml_operators,
        zipmap_as_tensor,
    )

    try:
        onnx.checker.check_model(str(path))  # by path: external weights are checked too
        model = onnx.load(str(path), load_external_data=False)
    except Exception as error:
        raise AddError(f"{path}: not a valid ONNX model: {first_line(error)}") from None
    dtypes = {code: name for name, code in ONNX_DTYPES.items()}
    if problem := non_tensor_output(model, path):
        raise AddError(problem)
    zipmaps = zipmap_as_tensor(model)
    vocabularies = embedding_rows(model)
    config_vocab = _config_beside(path)
    inputs, used_dims, notes, renamed = {}, {}, [], {}
    raw = {name: input_dims(value) for name, value in graph_inputs(model).items()}
    moved, notes = batch_axes_of(path, raw, flags.batch_axes)
    if unknown := sorted(set(flags.values) - {name for name, axes in raw.items() if not axes}):
        raise AddError(f"{path}: --value {', '.join(unknown)}: no such scalar input (shape [])")
    for name, value in graph_inputs(model).items():
        dtype = dtypes.get(value.type.tensor_type.elem_type)
        if dtype is None:
            found = onnx.helper.tensor_dtype_to_string(value.type.tensor_type.elem_type)
            raise AddError(f"{path}: input {name!r} is {found}: the pipeline feeds {', '.join(ONNX_DTYPES)}")
        if not raw[name]:  # a scalar: one value every call passes (--value, else the eval data's)
            inputs[name] = {"shape": [], "dtype": dtype} | (
                {"value": flags.values[name]} if name in flags.values else {}
            )
            given = (
                f"{flags.values[name]:g} on every call (--value)"
                if name in flags.values
                else "its value from the eval data"
            )
            notes.append(f"{name}: a scalar input, {given}")
            continue
        axis = moved.get(name, 0)
        shape = spec_shape(name, raw[name], dims, used_dims, renamed, axis)
        spec: dict[str, Any] = {"shape": shape, "dtype": dtype, **({"batch_axis": axis} if axis else {})}
        kind = token_kind(name, dtype)
        if kind != "values" and len(shape) >= 2:
            spec["kind"] = kind
            if kind != "attention_mask":
                bound, how = _vocabulary(name, kind, vocabularies, config_vocab, vocab)
                if bound is None:
                    raise AddError(
                        f"{path}: input {name!r} holds token ids, and neither the graph (an embedding it indexes) "
                        "nor a config.json beside the file says how many: pass --vocab N"
                    )
                spec["high"] = bound
                notes.append(f"{name}: {kind}, ids in [0, {bound}) ({how})")
            else:
                notes.append(f"{name}: attention_mask (its name and integer dtype)")
        inputs[name] = spec
    notes += axes_notes(path, dims, used_dims, renamed)
    first = next((spec for spec in inputs.values() if spec["shape"]), None)
    if first and isinstance(first["shape"][first.get("batch_axis", 0)], int):
        notes.append(f"batch fixed to {first['shape'][0]} by the file: run at that batch")
    quantized = sorted({node.op_type for node in model.graph.node} & onnx_files.QUANTIZED_OPS)
    if quantized:
        notes.append(
            f"already quantized ({', '.join(quantized)} in the graph): the INT8 variants quantize it again, and "
            "its own figures are the FP32 reference's"
        )
    entry = {"source": "onnx", "file": path.name, "inputs": inputs, **({"dims": used_dims} if used_dims else {})}
    if operators := onnx_ml_operators(model):
        entry["onnx_ml"] = True
        notes.append(f"ONNX-ML operators ({', '.join(operators)}): ONNX Runtime runs them; the variants that "
                     "cannot (OpenVINO, FP16, INT8) get no stage")  # fmt: skip
    if zipmaps:
        entry["task"] = "classification"
        notes.append(f"output {zipmaps[0]!r} is a ZipMap of class probabilities: read as a tensor [batch, classes], "
                     "first (task: classification)")  # fmt: skip
    elif softmax := softmax_output(model):
        entry["task"] = "classification"
        notes.append(f"output {softmax!r} comes from a softmax: class scores (task: classification), judged by "
                     "top-1 agreement, not as an embedding")  # fmt: skip
    files = {f.name: f for f in [path, *onnx_files.external_files(path)]}
    return Inferred(entry, files, list(files), notes)


def batch_axes_of(path: Path, raw: dict[str, list[Any]], flags: dict[str, int]) -> tuple[dict[str, int], list[str]]:
    """The inputs whose batch axis is not the first (a recurrent state [layers, batch, hidden]) and what
    says so: `--batch-axis`, else, where the other inputs' first axis is open and this one's is fixed,
    the axis the file names with their batch symbol, else its one open axis. A fixed-batch model
    (every first axis fixed) keeps its batch first."""

    def fixed(axis: Any) -> bool:
        return isinstance(axis, int) and axis > 0

    if unknown := sorted(set(flags) - {name for name, axes in raw.items() if axes}):
        raise AddError(f"{path}: --batch-axis {', '.join(unknown)}: no such input with axes (inputs: {sorted(raw)})")
    leaders = [(name, axes[0]) for name, axes in raw.items() if axes and not fixed(axes[0])]
    symbol = next((axis for _, axis in leaders if isinstance(axis, str) and symbol_of(axis)), None)
    found, notes = {}, []
    for name, axes in raw.items():
        if name in flags:
            if not 0 <= flags[name] < len(axes):
                raise AddError(f"{path}: --batch-axis {name}={flags[name]}: the input has {len(axes)} axes")
            found[name] = flags[name]
            notes.append(f"{name}: batch axis {flags[name]} (--batch-axis)")
            continue
        if not leaders or not axes or not fixed(axes[0]):
            continue
        named = [k for k, axis in enumerate(axes) if symbol is not None and axis == symbol]
        unnamed = [k for k, axis in enumerate(axes) if not fixed(axis)]
        if named:
            found[name] = named[0]
            notes.append(f"{name}: batch axis {named[0]} (the file names it {symbol!r}, as {leaders[0][0]}'s first)")
        elif len(unnamed) == 1:
            found[name] = unnamed[0]
            notes.append(f"{name}: batch axis {unnamed[0]} (its one open axis; {leaders[0][0]}'s batch is open)")
        else:
            raise AddError(
                f"{path}: input {name!r} fixes its first axis ({axes[0]}) where {leaders[0][0]}'s batch is open, "
                f"and the file does not say which of its axes is the batch: pass --batch-axis {name}=K"
            )
    return {name: axis for name, axis in found.items() if axis}, notes


PASS_THROUGH = {"Identity", "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Expand"}  # keep a softmax's rows as they are


def softmax_output(model: Any) -> str | None:
    """The first output's name when a softmax computes it (through reshapes): a Softmax node, or one
    written out as Div(Exp(x), ReduceSum(Exp(x))) as jax2tf exports it; the file's answer is class
    probabilities, whatever the task it was trained for; None otherwise (logits, embeddings). The
    bench also recognises probabilities by their values (pipeline.core.evaluate.is_probabilities)."""
    producer = {out: node for node in model.graph.node for out in node.output}

    def origin(name: str) -> Any:
        node = producer.get(name)
        while node is not None and node.op_type in PASS_THROUGH:
            node = producer.get(node.input[0])
        return node

    name = model.graph.output[0].name if model.graph.output else None
    node = origin(name) if name else None
    if node is not None and node.op_type == "Div" and len(node.input) == 2:
        exp, total = origin(node.input[0]), origin(node.input[1])
        if exp is not None and exp.op_type == "Exp" and total is not None and total.op_type == "ReduceSum":
            summed = origin(total.input[0])
            return name if summed is exp else None
    return name if node is not None and node.op_type in ("Softmax", "LogSoftmax") else None


def embedding_rows(model: Any) -> dict[str, int]:
    """Graph input -> rows of the initializer table a Gather indexes with it (directly or through a
    Cast/Unsqueeze/Reshape): the vocabulary an id must stay under."""
    tables = {t.name: list(t.dims) for t in model.graph.initializer}
    origin: dict[str, str] = {i.name: i.name for i in model.graph.input}
    rows: dict[str, int] = {}
    for node in model.graph.node:  # nodes are topologically sorted in a valid graph
        if node.op_type in {"Cast", "Unsqueeze", "Reshape", "Squeeze", "Identity"} and node.input[0] in origin:
            origin[node.output[0]] = origin[node.input[0]]
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] in origin and node.input[0] in tables:
            table = tables[node.input[0]]
            if table:
                rows[origin[node.input[1]]] = max(rows.get(origin[node.input[1]], 0), int(table[0]))
    return rows


def _vocabulary(
    name: str, kind: str, graph: dict[str, int], config: dict[str, Any], flag: int | None
) -> tuple[int | None, str]:
    if flag is not None and kind == "token_ids":
        return flag, "--vocab"
    if name in graph:
        return graph[name], "the rows of the embedding table it indexes"
    key = "vocab_size" if kind == "token_ids" else "type_vocab_size"
    if isinstance(config.get(key), int):
        return config[key], f"config.json's {key}"
    return None, ""


def _config_beside(path: Path) -> dict[str, Any]:
    try:
        return json.loads((path.parent / "config.json").read_text())
    except (OSError, ValueError):
        return {}


def inspect_hf(name: str, path: Path, task: str | None, dims: dict[str, int]) -> Inferred:
    """The entry of a Hugging Face folder: the task from `--task` or config.json's `architectures`,
    the inputs its config implies, built by pipeline.prepare.hf_folder (encoders, classifiers) or
    exported as a decoder (text-generation)."""
    from pipeline.prepare import hf_folder

    config = hf_folder.read_config(path)
    found = hf_folder.task_of(config)
    task = task or found
    if task is None:
        raise AddError(f"{path / 'config.json'}: its `architectures` name no task `add` knows: pass --task")
    weights = sorted(p.name for p in path.iterdir() if p.suffix in {".safetensors", ".bin", ".h5", ".msgpack"})
    if not weights:
        raise AddError(f"{path}: a Hugging Face config but no weights file (model.safetensors, pytorch_model.bin)")
    files, tracked = {HF_DIR: path}, [f"{HF_DIR}/{w}" for w in weights]
    how = "--task" if task != found else "config.json's architectures"
    notes = [f"task {task} ({how}: {', '.join(config.get('architectures') or ['none'])})"]
    if task == "text-generation":
        return Inferred({"source": "transformers", "file": HF_DIR, "task": task}, files, tracked, notes)
    if task not in hf_folder.TASKS:
        raise AddError(f"--task {task}: one of {', '.join((*hf_folder.TASKS, 'text-generation'))}")
    try:  # loads it as the export will: a classifier folder without its head stops here
        hf_folder.build(str(path), task)
    except PipelineError:
        raise
    except Exception as error:
        raise AddError(f"{path}: transformers cannot load it for {task}: {first_line(error)}") from None
    if task == "image-classification":
        size, channels = int(config.get("image_size") or 224), int(config.get("num_channels") or 3)
        inputs: dict[str, Any] = {"pixel_values": {"shape": ["batch", channels, size, size], "dtype": "float32"}}
        used_dims: dict[str, int] = {}
    else:
        seq = dims.get("seq", DEFAULT_DIM)
        vocab = {"input_ids": config.get("vocab_size"), "token_type_ids": config.get("type_vocab_size")}
        inputs = {}
        for input_name in hf_folder.text_inputs(config):
            kind = "token_ids" if input_name == "input_ids" else input_name
            inputs[input_name] = {"shape": ["batch", "seq"], "dtype": "int64", "kind": kind} | (
                {"high": int(vocab[input_name])} if vocab.get(input_name) else {}
            )
        used_dims = {"seq": seq}
        notes.append(f"inputs {', '.join(inputs)}, ids in [0, {vocab['input_ids']}) (config.json's vocab_size)")
    notes += axes_notes(path, dims, used_dims)
    classifier = task in ("text-classification", "image-classification")
    entry = {
        "source": "torch",
        "factory": HF_FOLDER_FACTORY,
        "factory_args": {"folder": f"{MODELS_DIR}/{name}/{HF_DIR}", "task": task},
        "inputs": inputs,
        **({"dims": used_dims} if used_dims else {}),
        "outputs": ["logits" if task != "feature-extraction" else "embedding"],
        **({"task": "classification"} if classifier else {"task": "embedding"} if task == "feature-extraction" else {}),
    }
    return Inferred(entry, files, tracked, notes)


def inspect_keras(path: Path, dims: dict[str, int]) -> Inferred:
    """The entry of a Keras 3 `.keras` file: its inputs' names (Keras' input layers), dtypes and shapes
    (an open axis after the batch becomes a symbol, `--dim` giving its value)."""
    from pipeline.core.config import InputSpec

    try:
        import keras

        model = keras.saving.load_model(str(path), compile=False)
    except Exception as error:
        raise AddError(f"{path}: not a loadable Keras model: {first_line(error)}") from None
    inputs, used_dims, notes = {}, {}, []
    for i, tensor in enumerate(model.inputs):
        name = re.sub(r"\W", "_", str(tensor.name).split(":")[0]).strip("_") or f"input_{i}"
        dtype = str(getattr(tensor.dtype, "name", tensor.dtype))
        shape = spec_shape(name, list(tensor.shape), dims, used_dims)
        spec = {"shape": shape, "dtype": dtype}
        try:
            InputSpec.model_validate(spec)
        except ValueError:
            raise AddError(f"{path}: input {name!r} is {dtype} {shape}: not an input the pipeline can feed") from None
        inputs[name] = spec
    notes += axes_notes(path, dims, used_dims)
    entry = {"source": "keras", "file": path.name, "inputs": inputs, **({"dims": used_dims} if used_dims else {})}
    return Inferred(entry, {path.name: path}, [path.name], notes)


def inspect(name: str, path: Path, flags: Flags) -> Inferred:
    """The entry for whatever PATH is; the kinds `add` cannot read are named."""
    from pipeline.prepare import add_code

    if add_code.is_code(path):
        return add_code.inspect_code(name, path, flags)
    if not path.exists():
        raise AddError(f"{path}: not found")
    if path.is_file() and path.suffix == ".onnx":
        return inspect_onnx(path, flags.dims, flags.vocab, flags)
    if path.is_file() and path.suffix == ".keras":
        return inspect_keras(path, flags.dims)
    if path.is_dir() and (path / "config.json").is_file():
        return inspect_hf(name, path, flags.task, flags.dims)
    if path.is_dir() and (path / "saved_model.pb").is_file():
        return add_code.inspect_savedmodel(path, flags.dims)
    raise AddError(
        f"{path}: not a model `add` reads: it takes an .onnx file (with its external-data files beside it), a "
        ".keras file, a SavedModel folder, a Hugging Face folder (config.json and weights), or a PyTorch or JAX "
        "factory as FILE.py:FUNCTION (docs/bring-your-own-model.md)"
    )


def with_eval(inferred: Inferred, eval_file: Path, metric: str | None, flags: dict[str, int] | None = None) -> None:
    """Check `--eval` against the inferred inputs (an .npz), or tokenize it (.txt: a text a line; .jsonl:
    {"text", "label"} rows) with a Hugging Face folder's own tokenizer; labels make it a classifier
    measured by accuracy. A symbolic axis no `--dim` set takes the data's size (take_data_dims)."""
    from pipeline.core.config import InputSpec
    from pipeline.core.data import dims_of, load_user_data

    if eval_file.suffix == ".npz":
        scalar_values(inferred, eval_file)
    specs = {k: InputSpec.model_validate(v) for k, v in inferred.entry["inputs"].items()}
    if eval_file.suffix in (".txt", ".jsonl"):
        folder = inferred.files.get(HF_DIR)
        if folder is None or "input_ids" not in specs:
            raise AddError(f"{eval_file}: text eval data is for a Hugging Face text model; give an .npz of inputs")
        encoder = inferred.entry.get("task") == "embedding"
        data = tokenized(eval_file, folder, list(specs), inferred.entry["dims"]["seq"], labelled=not encoder)
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
    if eval_file.suffix == ".npz":  # text was tokenized to the entry's seq
        take_data_dims(inferred, dims_of(loaded.inputs, specs), flags or {})
        integer_ranges(inferred, loaded.inputs)
    inferred.entry["eval_data"] = EVAL_FILE
    if loaded.labels is None:
        inferred.notes.append(f"eval data: {len(loaded)} rows, no labels: fidelity only")
        return
    inferred.entry |= {"metric": metric or "accuracy", "task": "classification"}
    inferred.notes.append(f"eval data: {len(loaded)} labelled rows: a classifier, metric {inferred.entry['metric']}")


def scalar_values(inferred: Inferred, eval_file: Path) -> None:
    """A scalar input's value from the eval data, where no --value gave it: one value for every row."""
    import numpy as np

    wanted = [n for n, spec in inferred.entry["inputs"].items() if not spec["shape"] and "value" not in spec]
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
        inferred.entry["inputs"][name]["value"] = float(value)
        inferred.notes = [
            f"{name}: a scalar input, {value} on every call (the eval data's)"
            if note.startswith(f"{name}: a scalar input") else note
            for note in inferred.notes
        ]  # fmt: skip


def integer_ranges(inferred: Inferred, rows: dict[str, Any]) -> None:
    """Integer inputs that are plain values (a byte, a category: no token kind, no bound yet) take the
    range the eval data holds, [min, max + 1): generated inputs stay in it and `predict` refuses a
    value outside it in one line (a byte value of 100000 was answered, exit 0)."""
    for name, spec in inferred.entry["inputs"].items():
        if not spec["shape"] or spec.get("kind", "values") != "values" or "high" in spec or "low" in spec:
            continue
        if spec["dtype"].startswith(("int", "uint")) and rows[name].size:
            low, high = int(rows[name].min()), int(rows[name].max()) + 1
            spec |= {"low": low, "high": high}
            inferred.notes.append(
                f"{name}: integers in [{low}, {high}) (the eval data's range): predict refuses others"
            )


def take_data_dims(inferred: Inferred, found: dict[str, int], flags: dict[str, int]) -> None:
    """The eval data fixes every symbolic axis it holds: one `--dim` did not set takes the data's size
    (the entry's `dims` drops it, as eval data supplies it), so a default never contradicts the data."""
    dims = inferred.entry.get("dims", {})
    for symbol, size in found.items():
        if symbol in dims and symbol not in flags:
            del dims[symbol]
            inferred.notes = [
                f"axis {symbol}: {size} from the eval data" if note.startswith(f"axis {symbol}:")
                or note.startswith(f"axis {symbol} (") else note
                for note in inferred.notes
            ]  # fmt: skip
    if "dims" in inferred.entry and not dims:
        del inferred.entry["dims"]


def tokenized(text_file: Path, folder: Path, names: list[str], seq: int, labelled: bool = True) -> Path:
    """`text_file` tokenized by the folder's tokenizer (its own pad id and special tokens), padded and
    truncated to `seq`, as an .npz beside a scratch copy; labels from .jsonl rows ("label": an int, or
    a name of config.json's label2id) unless not `labelled` (an encoder: nothing to score them on)."""
    import tempfile

    import numpy as np
    from transformers import AutoTokenizer

    from pipeline.prepare.hf_folder import read_config

    try:
        lines = [line for line in text_file.read_text().splitlines() if line.strip()]
        rows = [json.loads(line) for line in lines] if text_file.suffix == ".jsonl" else [{"text": t} for t in lines]
    except (OSError, ValueError) as error:
        raise AddError(f"{text_file}: not readable as {text_file.suffix} ({first_line(error)})") from None
    if not rows or any("text" not in row for row in rows):
        raise AddError(f'{text_file}: no rows, or a .jsonl row without "text"')
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


def add_model(name: str, path: Path, root: Path = Path("."), flags: Flags | None = None) -> Inferred:
    """Add model `name` from `path` to the project at `root`; see the module's docstring."""
    flags = flags or Flags()
    params_path = root / PARAMS_FILE
    params = load_params(params_path)
    if not NAME.fullmatch(name):
        raise AddError(f"{name!r}: a model name is letters, digits and '_', not starting with a digit")
    folder = model_dir(name, root)
    if name in params.catalog or folder.exists():
        where = f"{PARAMS_FILE}: catalog.{name}" if name in params.catalog else str(folder)
        raise AddError(f"{name}: the name is taken ({where}): choose another")
    inferred = inspect(name, path.resolve(), flags)
    staging = folder.with_name(f".{name}.add-tmp")
    new_params = params_path.with_name(f".{PARAMS_FILE}.add-tmp")
    try:
        if flags.eval is not None:
            with_eval(inferred, flags.eval.resolve(), flags.metric, flags.dims)
        specs = inferred.entry.get("inputs", {})
        if unset := [n for n, spec in specs.items() if not spec["shape"] and "value" not in spec]:
            raise AddError(f"{path}: input {unset[0]!r} is a scalar (shape []): give the value every call passes "
                           f"with --value {unset[0]}=V, or eval data that holds it")  # fmt: skip
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for target, source in inferred.files.items():
            (shutil.copytree if source.is_dir() else shutil.copy2)(source, staging / target)
        os.rename(staging, folder)
        new_params.write_text(with_entry(params_path.read_text(), name, inferred.entry))
        check(name, new_params, root)
        tracked = track(folder, inferred.tracked + _large(folder, EVAL_FILE), root)
        os.replace(new_params, params_path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
        new_params.unlink(missing_ok=True)
        raise
    finally:
        for scratch in inferred.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    if tracked:
        inferred.notes.append(f"versioned with dvc add: {', '.join(tracked)} (git gets the .dvc files)")
    return inferred


def check(name: str, params_file: Path, root: Path) -> None:
    """The new params.yaml validated and the model's files opened against its entry (as `check` does)."""
    from pipeline.prepare.check import check_model

    try:
        params = load_params(params_file)
    except PipelineError as error:
        raise AddError(str(error).replace(params_file.name, PARAMS_FILE)) from None
    check_model(name, params, root)
    if params.model(name).source in CODE_SOURCES:  # a factory: build it, load its weights, run an example
        import importlib

        from pipeline.prepare.sources import load_source

        importlib.invalidate_caches()  # models/NAME/ is new to this process's import system
        load_source(name, params.model(name), root)


def _large(folder: Path, file: str) -> list[str]:
    """`file` when it is present and over a megabyte: eval data that size goes to DVC too."""
    path = folder / file
    return [file] if path.exists() and path.stat().st_size > 1_000_000 else []


def track(folder: Path, files: list[str], root: Path) -> list[str]:
    """`dvc add` the model's files: git keeps a small .dvc file and a .gitignore entry for each."""
    paths = [f"{MODELS_DIR}/{folder.name}/{file}" for file in files]
    if not paths:  # code alone (no weights file): git keeps it
        return []
    done = subprocess.run(["dvc", "add", "-q", *paths], cwd=root, capture_output=True, text=True)
    if done.returncode:
        error = (done.stderr or done.stdout).strip().splitlines()
        raise ModelFileError(f"{folder}: `dvc add` failed: {error[-1] if error else done.returncode}")
    return [f"{p}.dvc" for p in paths]


def with_entry(text: str, name: str, entry: dict[str, Any]) -> str:
    """params.yaml's text with `name` appended to `models` and its catalog entry after the last one,
    every other line as it was (comments included), each input spec on one line as written by hand.
    The result is read back and must hold exactly that."""
    import yaml

    lines = text.splitlines()
    models = _block(lines, "models")
    flow = re.fullmatch(r"models:\s*\[(.*)\]\s*(#.*)?", lines[models[0]])
    if flow:
        items = [item for item in flow.group(1).split(",") if item.strip()]
        lines[models[0]] = f"models: [{', '.join(i.strip() for i in [*items, name])}]" + (
            f"  {flow.group(2)}" if flow.group(2) else ""
        )
    else:
        last = max(i for i in range(models[0] + 1, models[1]) if lines[i].lstrip().startswith("- "))
        lines.insert(last + 1, lines[last][: lines[last].index("-")] + f"- {name}")
    catalog = _block(lines, "catalog")
    lines[catalog[1] : catalog[1]] = entry_lines(name, entry)
    result = "\n".join(lines) + "\n"
    read = yaml.safe_load(result)
    if read["models"][-1] != name or read["catalog"].get(name) != entry:
        raise AddError(f"{PARAMS_FILE}: could not add catalog.{name} and keep the file's layout: write it by hand")
    return result


def _block(lines: list[str], key: str) -> tuple[int, int]:
    """The top-level `key:` line and the index after its block's last content line (before the
    comments and blank lines that introduce the next key)."""
    start = next((i for i, line in enumerate(lines) if line.startswith(f"{key}:")), None)
    if start is None:
        raise AddError(f"{PARAMS_FILE}: no top-level `{key}:`")
    end = next((i for i in range(start + 1, len(lines)) if lines[i][:1] not in ("", " ", "#", "-")), len(lines))
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1
    return start, end


def entry_lines(name: str, entry: dict[str, Any]) -> list[str]:
    """A catalog entry as params.yaml's hand-written ones look: one key a line, specs in flow style."""
    import yaml

    def flow(value: Any) -> str:
        return yaml.safe_dump([value], default_flow_style=True, width=4096, sort_keys=False).strip()[1:-1]

    lines = [f"  {name}:"]
    for key, value in entry.items():
        if key == "inputs":
            lines += ["    inputs:", *(f"      {flow(k)}: {flow(spec)}" for k, spec in value.items())]
        else:
            lines.append(f"    {key}: {flow(value)}")
    return lines


def parse_assignments(flag: str, values: list[str], kind: type) -> dict[str, Any]:
    """NAME=V flags (--value sr=16000, --batch-axis state=1) as {NAME: V}; one line for a bad one."""
    found = {}
    for value in values:
        name, _, number = value.rpartition("=")
        try:
            found[name] = kind(number)
        except ValueError:
            found[name] = None
        if not name or found[name] is None or (kind is int and found[name] < 0):
            raise AddError(
                f"{flag} {value}: expected NAME={'K (an axis, 0 or more)' if kind is int else 'V (a number)'}"
            )
    return found


def parse_dims(values: list[str]) -> dict[str, int]:
    """--dim seq=128 flags as {seq: 128}; an axis may be given by the file's own name, whatever its
    characters (`--dim p2o.DynamicDimension.1=320`), or by the entry's (symbol_of)."""
    dims = {}
    for value in values:
        axis, _, number = value.rpartition("=")
        symbol = symbol_of(axis)
        if symbol is None or not number.isdigit() or int(number) < 1:
            raise AddError(f"--dim {value}: expected AXIS=N with an axis name and a positive N (e.g. seq=128)")
        dims[symbol] = int(number)
    return dims


def describe(name: str, inferred: Inferred) -> str:
    """What `add` prints: the entry, what it inferred, and the one command to run."""
    lines = [f"added {name} to {PARAMS_FILE} (catalog and models) and {MODELS_DIR}/{name}/:"]
    lines += entry_lines(name, inferred.entry)
    lines += [f"  - {note}" for note in inferred.notes]
    lines.append(f"run it: dvc repro   (then: python -m pipeline summary {name})")
    return "\n".join(lines)
