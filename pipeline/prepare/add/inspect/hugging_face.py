"""`add` reading a Hugging Face folder: the task (`--task`, else config.json's `architectures`) and the
inputs its config implies; transformers loads it as the export will (pipeline.prepare.hf_folder builds
it), or a causal LM is a text-generation model (exported as a decoder)."""

from __future__ import annotations

from pathlib import Path

from pipeline.core.errors import PipelineError, first_line
from pipeline.core.layout import MODELS
from pipeline.prepare.add.axes import DEFAULT_DIM, axes_notes
from pipeline.prepare.add.flags import Flags
from pipeline.prepare.add.inferred import AddError, Entry, Inferred, Input
from pipeline.serve.text import HF_FOLDER_FACTORY

HF_DIR = "hf"  # a Hugging Face folder's place inside models/NAME/


def reads(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file()


def inspect_hf(name: str, path: Path, flags: Flags) -> Inferred:
    """The entry of a Hugging Face folder: the task from `--task` or config.json's `architectures`,
    the inputs its config implies (`--dim seq`), built by pipeline.prepare.hf_folder (encoders,
    classifiers) or exported as a decoder (text-generation); its factory finds it under models/NAME/."""
    from pipeline.prepare import hf_folder

    config = hf_folder.read_config(path)
    found = hf_folder.task_of(config)
    task, dims = flags.task or found, flags.dims
    if task is None:
        raise AddError(f"{path / 'config.json'}: its `architectures` name no task `add` knows: pass --task")
    weights = sorted(p.name for p in path.iterdir() if p.suffix in {".safetensors", ".bin", ".h5", ".msgpack"})
    if not weights:
        raise AddError(f"{path}: a Hugging Face config but no weights file (model.safetensors, pytorch_model.bin)")
    files, tracked = {HF_DIR: path}, [f"{HF_DIR}/{w}" for w in weights]
    how = "--task" if task != found else "config.json's architectures"
    notes = [f"task {task} ({how}: {', '.join(config.get('architectures') or ['none'])})"]
    if task == "text-generation":
        return Inferred(Entry("transformers", file=HF_DIR, task=task), files, tracked, notes)
    if task not in hf_folder.TASKS:
        raise AddError(f"--task {task}: one of {', '.join((*hf_folder.TASKS, 'text-generation'))}")
    try:  # loads it as the export will: a classifier folder without its head stops here
        loaded = hf_folder.build(str(path), task).config  # transformers' typed config, its class's defaults filled in
    except PipelineError:
        raise
    except Exception as error:
        raise AddError(f"{path}: transformers cannot load it for {task}: {first_line(error)}") from None
    if task == "image-classification":
        size, channels = int(loaded.image_size), int(loaded.num_channels)
        inputs = {"pixel_values": Input(["batch", channels, size, size], "float32")}
        used_dims: dict[str, int] = {}
    else:
        seq = dims.get("seq", DEFAULT_DIM)
        vocab = {"input_ids": loaded.vocab_size, "token_type_ids": getattr(loaded, "type_vocab_size", None)}
        inputs = {}
        for input_name in hf_folder.text_inputs(config):
            kind = "token_ids" if input_name == "input_ids" else input_name
            bound = vocab.get(input_name)
            inputs[input_name] = Input(["batch", "seq"], "int64", kind=kind, high=int(bound) if bound else None)
        used_dims = {"seq": seq}
        notes.append(f"inputs {', '.join(inputs)}, ids in [0, {vocab['input_ids']}) (config.json's vocab_size)")
    notes += axes_notes(path, dims, used_dims)
    classifier = task in ("text-classification", "image-classification")
    entry = Entry(
        "torch",
        factory=HF_FOLDER_FACTORY,
        factory_args={"folder": f"{MODELS}/{name}/{HF_DIR}", "task": task},
        inputs=inputs,
        dims=used_dims,
        outputs=["logits" if task != "feature-extraction" else "embedding"],
        task="classification" if classifier else "embedding" if task == "feature-extraction" else None,
    )
    return Inferred(entry, files, tracked, notes)
