"""A Triton model repository: serving/triton/<model>/config.pbtxt and the artifact in version folder 1/.

The config is Triton's own protobuf (tritonclient's model_config_pb2) printed by protobuf's text
format; every setting taken from a measurement is named in a header comment. The backends' keys
are the ones their READMEs and sources read (triton-inference-server/onnxruntime_backend README and
src/onnxruntime.cc; openvino_backend README and src/openvino.cc).
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from pipeline.core.files import write_text
from pipeline.core.records.manifest import Manifest
from pipeline.runtimes import ort
from pipeline.serve.repositories import measured
from pipeline.serve.repositories.analyzer import FILE as MODEL_ANALYZER
from pipeline.serve.repositories.analyzer import write_analyzer
from pipeline.serve.repositories.artifact import VERSION, artifact_files, place
from pipeline.serve.repositories.scope import NotServable
from pipeline.serve.signature import Signature, TensorSpec, triton_type

CONFIG = "config.pbtxt"
BACKEND = {"onnxruntime": "onnxruntime", "openvino": "openvino"}  # manifest runtime -> Triton backend
DEFAULT_MODEL_FILE = {"onnxruntime": "model.onnx", "openvino": "model.xml"}  # each backend's default file name
# onnxruntime_backend README: optimization.graph.level -1 basic, 1 extended, 2 disabled; absent: all (its default)
ORT_GRAPH_LEVEL = {"basic": -1, "extended": 1, "disabled": 2}
ORT_PARAMETERS = frozenset({
    "intra_op_thread_count", "inter_op_thread_count", "execution_mode", "enable_mem_arena", "enable_mem_pattern",
    "memory.enable_memory_arena_shrinkage", "session.use_device_allocator_for_initializers",
})  # fmt: skip
# The keys openvino_backend's ParseParameters reads (README "Parameters"); it ignores any other key silently
OPENVINO_PARAMETERS = frozenset({
    "PERFORMANCE_HINT", "CPU_EXTENSION_PATH", "INFERENCE_NUM_THREADS", "COMPILATION_NUM_THREADS", "HINT_BF16",
    "NUM_STREAMS", "SKIP_OV_DYNAMIC_BATCHSIZE", "ENABLE_BATCH_PADDING", "RESHAPE_IO_LAYERS", "TARGET_DEVICE",
})  # fmt: skip
# OVMS performance tuning guide (docs/performance_tuning.md): NUM_STREAMS and PERFORMANCE_HINT should not be used
# together; the streams measured are written, since they are what the figures ran with
STREAMS_NOT_HINT = "NUM_STREAMS without PERFORMANCE_HINT: OVMS's performance tuning guide says not to use both"
OPENVINO_BATCH = (
    "the openvino_backend fixes a batching model to max_batch_size (ov::set_batch in src/openvino.cc) and refuses "
    "any other batch unless ENABLE_BATCH_PADDING pads it: with 0 the dynamic model takes the batch each request "
    "brings, as the benchmark fed it"
)


def batching(manifest: Manifest, signature: Signature, backend: str) -> tuple[int, str]:
    """max_batch_size and why: the sweep's largest batch when the server may stack requests along
    the first axis, else 0 (the batch axis then stays in dims)."""
    if backend == "openvino":
        return 0, f"max_batch_size 0 (dims keep the batch axis): {OPENVINO_BATCH}"
    problem = measured.batch_axis_problem(manifest, signature)
    if problem:
        return 0, f"max_batch_size 0 (dims keep the batch axis): {problem}"
    largest = measured.largest_batch(manifest)
    if largest is None:
        return 0, "max_batch_size 0 (dims keep the batch axis): no throughput sweep recorded, no batch size measured"
    return largest, (
        f"max_batch_size {largest}: largest batch of the throughput sweep on {manifest.machine} "
        f"({measured.sweep_text(manifest)})"
    )


def dims(tensor: TensorSpec, batched: bool) -> tuple[list[int], list[int] | None]:
    """Config dims (without the batch axis when Triton batches) and the reshape a scalar needs:
    Triton's dims take at least one dimension, so a scalar travels as [1] and is reshaped to []."""
    if not tensor.shape:
        return [1], []
    return (tensor.shape[1:] if batched else tensor.shape), None


def triton_config(manifest: Manifest, signature: Signature) -> tuple[mc.ModelConfig, list[str]]:
    """The model config and the header comments naming where each setting came from."""
    backend = BACKEND[manifest.runtime]
    if backend == "openvino" and any(not t.shape for t in signature.inputs):
        raise NotServable("the openvino_backend does not take scalar inputs (README, Known Issues)")
    config = mc.ModelConfig(name=manifest.model, backend=backend)
    notes = [f"backend {backend}: measured on {manifest.runtime} {manifest.runtime_version}"]
    if manifest.entry != DEFAULT_MODEL_FILE[backend]:
        config.default_model_filename = manifest.entry
    config.max_batch_size, why = batching(manifest, signature, backend)
    notes.append(why)
    batched = config.max_batch_size > 0
    for tensors, add in ((signature.inputs, config.input.add), (signature.outputs, config.output.add)):
        for tensor in tensors:
            shape, reshape = dims(tensor, batched)
            entry = add(name=tensor.name, data_type=mc.DataType.Value(triton_type(tensor.datatype)), dims=shape)
            if reshape is not None:
                entry.reshape.shape[:] = reshape
    if manifest.dims:
        sizes = ", ".join(f"{k} {v}" for k, v in manifest.dims.items())
        notes.append(f"dims -1: any size; the figures were measured at {sizes}")
    notes += _dynamic_batching(config, manifest)
    notes += _instances(config, manifest, backend)
    return config, notes


def _dynamic_batching(config: mc.ModelConfig, manifest: Manifest) -> list[str]:
    """`dynamic_batching {}` where the sweep shows batching gains, as Model Analyzer and Model Navigator
    start: no preferred sizes (batcher.md advises against them for most models: with one equal to
    max_batch_size and a delay, every request that cannot fill the batch waits the full delay) and no
    queue delay (the batcher then stacks only what is already queued). Whether waiting pays depends on the
    arrival rate, which no bench measures: model_analyzer.yaml searches delays on a real Triton."""
    pays, why = measured.batching_pays(manifest)
    if config.max_batch_size == 0:
        return [f"no dynamic_batching: it needs max_batch_size above 0 ({why})"]
    if not pays:
        return [f"no dynamic_batching: {why}: gathering requests would only add latency"]
    config.dynamic_batching.SetInParent()
    return [
        f"dynamic_batching {{}}: {why}",
        f"no preferred_batch_size, max_queue_delay_microseconds 0: requests already queued are stacked, none waits "
        f"(Triton batcher.md; Model Analyzer's starting point); {MODEL_ANALYZER} searches delays under your load",
    ]


def _instances(config: mc.ModelConfig, manifest: Manifest, backend: str) -> list[str]:
    found = measured.concurrency(manifest)
    config.instance_group.add(count=found.requests, kind=mc.ModelInstanceGroup.KIND_CPU)
    notes = [f"instance_group count {found.requests} KIND_CPU: the concurrent measurement ran {found.text}"]
    if backend == "onnxruntime":
        share = found.threads_per_request
        parameters = {"intra_op_thread_count": share, "inter_op_thread_count": 1, "execution_mode": 0}
        notes.append(
            f"intra_op_thread_count {share}: {found.total_threads} threads // {found.requests} requests, one session "
            f"per instance as measured ({found.how})"
        )
        notes.append(
            "inter_op_thread_count 1, execution_mode 0 (sequential): how pipeline.runtimes.ort runs every session"
        )
        level = measured.runtime_settings(manifest, ort.Details).graph_optimization or "all"
        if level in ORT_GRAPH_LEVEL:
            config.optimization.graph.level = ORT_GRAPH_LEVEL[level]
            notes.append(f"optimization.graph.level {ORT_GRAPH_LEVEL[level]}: graph optimization {level}, as measured")
        else:
            notes.append(f"optimization.graph: none written: graph optimization {level} is the backend's default")
    else:
        parameters, more = _openvino_parameters(found, manifest)
        notes += more
    for key, value in parameters.items():
        config.parameters[key].string_value = str(value)
    return notes


def _openvino_parameters(found: measured.Concurrency, manifest: Manifest) -> tuple[dict[str, object], list[str]]:
    plugin = measured.openvino_plugin(manifest)
    parameters: dict[str, object] = {"INFERENCE_NUM_THREADS": plugin.threads}
    notes = []
    if plugin.streams is not None:
        parameters["NUM_STREAMS"] = plugin.streams
        notes.append(
            f"NUM_STREAMS {plugin.streams}, INFERENCE_NUM_THREADS {plugin.threads}: the streams the concurrent "
            f"measurement's THROUGHPUT hint made ({found.how}); the instances share them, one infer request each; "
            f"{STREAMS_NOT_HINT}"
        )
    else:
        notes.append(f"INFERENCE_NUM_THREADS {plugin.threads}: the threads of the concurrent measurement ({found.how})")
    if plugin.precision == "bf16":
        parameters["HINT_BF16"] = "YES"
        notes.append("HINT_BF16 YES: the measured run computed in bf16")
    elif plugin.precision:
        notes.append(
            f"INFERENCE_PRECISION_HINT {plugin.precision} (measured): not written, the openvino_backend has no key "
            "for it (README documents HINT_BF16 only): the CPU plugin's default precision applies, bf16 on a CPU with "
            "AMX or native BF16; serve it with OVMS (ovms/) to pin it"
        )
    if plugin.group_size is not None:
        notes.append(
            f"DYNAMIC_QUANTIZATION_GROUP_SIZE {plugin.group_size} (measured): not written, not a documented "
            "openvino_backend parameter (its sources ignore unknown keys): the plugin's default applies"
        )
    return parameters, notes


def header(manifest: Manifest, notes: list[str]) -> str:
    """Comment lines above the config: what it serves, its sha256, and each measured setting's source."""
    lines = [
        f"Triton model configuration for {manifest.model}: variant {manifest.variant}, measured on "
        f"{manifest.machine}; written by `python -m pipeline serving` from manifest.json",
        *(f"sha256 {VERSION}/{name} {manifest.files[name]}" for name in artifact_files(manifest)),
        *notes,
    ]
    return "".join(f"# {line}\n" for line in lines)


def pinned_properties(manifest: Manifest) -> dict[str, str]:
    """The OpenVINO properties the openvino_backend's parameters pin for this config (what the release
    check compiles with): bf16 when HINT_BF16 is written, else the plugin's defaults."""
    if manifest.runtime != "openvino":
        return {}
    return {"INFERENCE_PRECISION_HINT": "bf16"} if measured.openvino_plugin(manifest).precision == "bf16" else {}


def write_triton(folder: Path, manifest: Manifest, signature: Signature, serving: Path, checked: str) -> str:
    """serving/triton/<model>/: config.pbtxt and version folder 1/, the header naming what the release's
    runtime made of it (`checked`); returns a one-line summary."""
    config, notes = triton_config(manifest, signature)
    notes.insert(1, checked)
    model_dir = serving / "triton" / manifest.model
    place(folder, manifest, model_dir / VERSION)
    write_text(model_dir / CONFIG, header(manifest, notes) + text_format.MessageToString(config))
    write_analyzer(manifest, config, serving)
    batching = "dynamic batching" if config.HasField("dynamic_batching") else "no dynamic batching"
    count = config.instance_group[0].count
    settings = f"{config.backend} backend, max_batch_size {config.max_batch_size}, {batching}, {count} instance(s)"
    return f"triton/{manifest.model} ({settings}), {MODEL_ANALYZER}"
