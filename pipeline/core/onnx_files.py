"""ONNX files as the pipeline writes, copies and names them.

Models over 2 GB cannot live in one protobuf: their weights go to a side file (ONNX "external
data"). Every file this pipeline writes keeps that layout when its source had it, naming the side
file `<model file>.data`, so an artifact folder is always self-contained and copyable.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import shutil
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.core.errors import NotApplicable

if TYPE_CHECKING:
    import onnx
    import onnxruntime as ort

EXTERNAL_ABOVE = 1 << 30  # a model this big keeps its weights in a side file (protobuf's limit is 2 GB)
CONTRIB_DOMAIN = "ai.onnx.contrib"  # onnxruntime-extensions' operators: tf2onnx writes its text operators there


@functools.cache
def extensions_library() -> str | None:
    """The path of onnxruntime-extensions' operator library (StringRegexReplace, StringToHashBucketFast, ...), or
    None where the package is not installed. Found without importing the package: its imports take 2 s."""
    spec = importlib.util.find_spec("onnxruntime_extensions")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    found = [folder / f"_extensions_pydll{suffix}" for suffix in importlib.machinery.EXTENSION_SUFFIXES]
    return next((str(path) for path in found if path.is_file()), None)


def session_options() -> ort.SessionOptions:
    """ONNX Runtime session options that read graphs holding onnxruntime-extensions' operators. Registering the
    library takes 0.1 ms and adds only its own domain; every session this pipeline opens starts from these."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if library := extensions_library():
        options.register_custom_ops_library(library)
    return options


def contrib_opset() -> onnx.OperatorSetIdProto:
    import onnx

    return onnx.helper.make_opsetid(CONTRIB_DOMAIN, 1)


def external_files(path: Path) -> list[Path]:
    """The side files `path`'s initializers point to (none when all weights are inside)."""
    import onnx
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data

    model = onnx.load(str(path), load_external_data=False)
    tensors = [*model.graph.initializer]
    tensors += [a.t for node in model.graph.node for a in node.attribute if a.HasField("t")]
    locations = {ExternalDataInfo(t).location for t in tensors if uses_external_data(t)}
    return [path.parent / location for location in sorted(locations)]


def uses_external_data(path: Path) -> bool:
    return bool(external_files(path))


def too_big(model: onnx.ModelProto) -> bool:
    """Over EXTERNAL_ABOVE; past protobuf's 2 GB ByteSize() itself fails (EncodeError)."""
    from google.protobuf.message import EncodeError

    try:
        return model.ByteSize() > EXTERNAL_ABOVE
    except EncodeError:
        return True


def save(model: onnx.ModelProto, path: Path, external: bool = False) -> None:
    """Write `model` to `path`; weights go to `<name>.data` beside it when asked or when too big."""
    import onnx

    external = external or too_big(model)
    data = path.with_name(path.name + ".data")
    data.unlink(missing_ok=True)  # save_model appends to an existing data file
    onnx.save_model(model, str(path), save_as_external_data=external, all_tensors_to_one_file=True, location=data.name)


def resave(model: onnx.ModelProto, path: Path) -> None:
    """Rewrite `path` (loaded, weights included, into `model`) in this module's layout and remove the
    side files the file there pointed to: torch's TorchScript exporter writes one file per tensor."""
    previous = external_files(path)
    save(model, path)
    kept = set(external_files(path))
    for side in previous:
        if side not in kept:
            side.unlink(missing_ok=True)


def remove_unreferenced(path: Path) -> None:
    """Remove every file beside `path` that is neither it nor one of its side files: ORT's static
    quantizer leaves a copy of the FP32 weights there, one file per tensor, on a model over 2 GB."""
    keep = {path, *external_files(path)}
    for other in path.parent.iterdir():
        if other.is_file() and other not in keep:
            other.unlink()


def copy(source: Path, destination: Path) -> None:
    """Copy an ONNX file and the side files of its weights (same relative locations)."""
    shutil.copy2(source, destination)
    for side in external_files(source):
        target = destination.parent / side.relative_to(source.parent)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(side, target)


# operators that compute on quantized values: a graph with none of them is no INT8/INT4 model
QUANTIZED_OPS = {"DequantizeLinear", "MatMulNBits", "MatMulInteger", "ConvInteger", "QLinearConv", "QLinearMatMul",
                 "DynamicQuantizeLinear", "GatherBlockQuantized"}  # fmt: skip


def quantized_ops(path: Path) -> Counter[str]:
    """The quantized operators in a graph (its subgraphs included), by type: what the artifact is,
    whatever its recipe meant it to be."""
    import onnx

    def walk(graph: onnx.GraphProto) -> list[str]:
        found = [node.op_type for node in graph.node if node.op_type in QUANTIZED_OPS]
        for node in graph.node:
            for attribute in node.attribute:
                found += walk(attribute.g) if attribute.HasField("g") else []
                found += [op for g in attribute.graphs for op in walk(g)]
        return found

    return Counter(walk(onnx.load(str(path), load_external_data=False).graph))


def graph_stats(path: Path) -> dict[str, object]:
    """Node count and the three most common op types, for before/after comparisons."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    ops = Counter(node.op_type for node in model.graph.node)
    return {"nodes": len(model.graph.node), "top_ops": ", ".join(f"{op}:{n}" for op, n in ops.most_common(3))}


def keep_output(model: onnx.ModelProto, wanted: str | None, names: list[str]) -> None:
    """Keep the converter's output named `wanted` (else its last: a classifier converter writes the label first
    and the probabilities last) and name it as the source does (`names`)."""
    kept = [o for o in model.graph.output if o.name == wanted] or list(model.graph.output)[-1:]
    del model.graph.output[:]
    model.graph.output.extend(kept)
    name_outputs(model, names)


def name_outputs(model: onnx.ModelProto, names: list[str]) -> None:
    """Give the graph's outputs `names`, whatever the exporter called them.

    A wanted name that an internal tensor already has (torch's exporter names tensors after
    modules, so an output called 'embedding' meets the tensor of the module `embedding`) is
    first given to that tensor under another name; an output that is also a graph input, an
    initializer or listed twice gets an Identity node, so every name stays assigned once (SSA).
    """
    import onnx

    graph = model.graph
    outputs = list(graph.output)
    if len(names) != len(outputs):
        raise ValueError(f"{len(names)} output names for {len(outputs)} outputs")
    if [o.name for o in outputs] == names:
        return
    taken = _tensor_names(graph)
    current = {o.name for o in outputs}
    inputs = {i.name for i in graph.input}
    for name in names:
        if name in inputs:
            raise ValueError(f"output name {name!r} is the name of a graph input")
        if name in taken and name not in current:
            _rename(graph, name, _unique(f"{name}_internal", taken))
    sources = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    counts = Counter(o.name for o in outputs)
    for output, name in zip(outputs, names, strict=True):
        if output.name == name:
            continue
        if output.name in sources or counts[output.name] > 1 or name in current:
            graph.node.append(onnx.helper.make_node("Identity", [output.name], [name], name=f"{name}_identity"))
            output.name = name
        else:
            _rename(graph, output.name, name)


LOCALES = ("C.UTF-8", "C")  # what every glibc image has, best first


def with_available_locale(model: onnx.ModelProto) -> dict[str, object] | None:
    """Rescue string_normalizer_locale: where ONNX Runtime cannot open `model` for want of a StringNormalizer's
    locale, set those nodes' locale to the first of LOCALES that it opens with; returns the rescue's record
    (None: the graph opened as it was). Any other failure to open is left for the caller to meet."""
    import onnxruntime as ort

    from pipeline.core import rescues

    nodes = [node for node in model.graph.node if node.op_type == "StringNormalizer"]
    if not nodes:
        return None

    def opens() -> Exception | None:
        try:
            ort.InferenceSession(model.SerializeToString(), session_options(), providers=["CPUExecutionProvider"])
            return None
        except Exception as error:
            return error

    error = opens()
    rescue = rescues.find("string_normalizer_locale", error) if error is not None else None
    if rescue is None:
        return None
    for locale in LOCALES:
        set_locale(model, locale)
        if opens() is None:
            return rescue.record(error, locale=locale, nodes=len(nodes))
    raise error


def set_locale(model: onnx.ModelProto, locale: str) -> None:
    """Every StringNormalizer of the graph asks for `locale`."""
    import onnx

    for node in model.graph.node:
        if node.op_type == "StringNormalizer":
            kept = [a for a in node.attribute if a.name != "locale"]
            del node.attribute[:]
            node.attribute.extend([*kept, onnx.helper.make_attribute("locale", locale)])


def string_locales(model: onnx.ModelProto) -> list[str]:
    """The locales the graph's StringNormalizers ask ONNX Runtime for (one that names none asks for en_US.UTF-8):
    the locales a serving image must have."""
    asked = (next((a.s.decode() for a in node.attribute if a.name == "locale"), "en_US.UTF-8")
             for node in model.graph.node if node.op_type == "StringNormalizer")  # fmt: skip
    return sorted(set(asked))


def name_inputs(model: onnx.ModelProto, names: dict[str, str]) -> None:
    """Rename the graph's inputs (`names`: exporter's name -> the spec's), a tensor already holding a wanted
    name first moved aside (tf2onnx names inputs after TFLite tensors: 'serving_default_image:0')."""
    taken = _tensor_names(model.graph)
    for old, new in names.items():
        if old == new:
            continue
        if new in taken:
            _rename(model.graph, new, _unique(f"{new}_internal", taken))
        _rename(model.graph, old, new)


def _tensor_names(graph: onnx.GraphProto) -> set[str]:
    names = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {v.name for v in graph.value_info}
    return names | {name for node in graph.node for name in node.output}


def _unique(base: str, taken: set[str]) -> str:
    candidate, i = base, 1
    while candidate in taken:
        candidate, i = f"{base}{i}", i + 1
    taken.add(candidate)
    return candidate


def _rename(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Rename tensor `old` everywhere in `graph` (subgraphs of If/Loop included)."""
    for node in graph.node:
        node.input[:] = [new if n == old else n for n in node.input]
        node.output[:] = [new if n == old else n for n in node.output]
        for attribute in node.attribute:
            for sub in [attribute.g, *attribute.graphs] if attribute.HasField("g") else attribute.graphs:
                _rename(sub, old, new)
    for value in [*graph.input, *graph.output, *graph.value_info]:
        if value.name == old:
            value.name = new
    for initializer in graph.initializer:
        if initializer.name == old:
            initializer.name = new


# Operators that pass values on unchanged (a reshape, a copy, a type change): an output's producer lies behind them
PASS_THROUGH = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Cast", "Slice", "Gather",
                "Split", "Concat", "Expand", "Tile", "DequantizeLinear", "QuantizeLinear"}  # fmt: skip


def output_producers(model: onnx.ModelProto) -> dict[str, str]:
    """By graph output: the operator that computes its values (Sigmoid, Softmax, Gemm, ...), looked up behind the
    operators that only move values (PASS_THROUGH); outputs an initializer or an input gives are left out."""
    made = {out: node for node in model.graph.node for out in node.output}
    found = {}
    for output in model.graph.output:
        node, seen = made.get(output.name), 0
        while node is not None and node.op_type in PASS_THROUGH and node.input and seen < 64:
            node, seen = made.get(node.input[0]), seen + 1
        if node is not None:
            found[output.name] = node.op_type
    return found


def file_producers(path: Path) -> dict[str, str]:
    """output_producers of the ONNX file at `path`, its weights left unread; {} where `path` is no ONNX file (a
    source of another kind, a failed export)."""
    import onnx

    if path.suffix != ".onnx" or not path.is_file():
        return {}
    return output_producers(onnx.load(str(path), load_external_data=False))


STANDARD_DOMAINS = {"": "", "ai.onnx": "", "ai.onnx.ml": "ai.onnx.ml"}


def unknown_operators(model: onnx.ModelProto) -> Counter[str]:
    """Operators of the standard domains that have no definition at the opset the model imports: what a converter
    left unconverted under the framework's name (tf2onnx's 'StringLength', 'RFFT2D'), or wrote newer than its opset
    (StringSplit, opset 20, in an opset-18 graph). ONNX Runtime refuses to load such a graph."""
    import onnx

    opsets = {STANDARD_DOMAINS.get(o.domain, o.domain): o.version for o in model.opset_import}
    found: Counter[str] = Counter()
    for node in model.graph.node:
        domain = STANDARD_DOMAINS.get(node.domain)
        if domain is None or domain not in opsets:
            continue
        try:
            onnx.defs.get_schema(node.op_type, opsets[domain], domain)
        except onnx.defs.SchemaError:
            found[node.op_type] += 1
    return found


def refuse_unknown_operators(model: onnx.ModelProto, converter: str) -> None:
    """A converter's graph that ONNX Runtime cannot load (unknown_operators) is no ONNX variant: NotApplicable, each
    operator it left named, so every ONNX variant is skipped with that reason rather than failed."""
    if left := unknown_operators(model):
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), "?")
        named = ", ".join(f"{op} (x{n})" if n > 1 else op for op, n in sorted(left.items()))
        raise NotApplicable(
            f"{converter} leaves operators ONNX has no definition of at opset {opset}: {named}: no ONNX variant"
        )
