"""TensorFlow sources: a Keras 3 model (.keras file, or a factory) and a TF SavedModel.

Both become one TF callable (positional input tensors -> list of output tensors); from it come the
reference outputs, the ONNX export (tf2onnx over a tf.function: tf2onnx's from_keras does not
handle Keras 3 models) and the tf_graph / tf_xla SavedModels.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tensorflow as tf

from pipeline.core import rescues
from pipeline.core.config import PARAMS_FILE, ExportConfig, InputSpec, ModelConfig
from pipeline.core.data import Arrays
from pipeline.core.errors import ConfigError, ModelFileError, first_line
from pipeline.core.model_code import import_object
from pipeline.prepare.sources.base import SourceModel, output_names
from pipeline.runtimes.tf_rt import as_numpy

TF2ONNX_MAX_OPSET = 18  # the newest opset tf2onnx 1.17 emits
SIGNATURE = "serving_default"

TfCall = Callable[..., list[tf.Tensor]]


def input_signature(specs: dict[str, InputSpec]) -> list[tf.TensorSpec]:
    """Symbolic dimensions (a batch axis named by a symbol included) stay open: None in TF."""
    return [tf.TensorSpec([d if isinstance(d, int) else None for d in spec.shape], tf_dtype(spec.dtype), name=name)
            for name, spec in specs.items()]  # fmt: skip


def tf_dtype(dtype: str) -> tf.DType:
    """The spec's dtype as TensorFlow's: text (`str`) is tf.string."""
    return tf.string if dtype == "str" else tf.dtypes.as_dtype(dtype)


class ServingModule(tf.Module):
    """A SavedModel root: tracks the model's variables, serves outputs by name.

    Written with tf.Module and tf.function rather than keras.export.ExportArchive, because the
    latter drops `jit_compile` (its saved graph has no _XlaMustCompile mark; checked here).
    """

    def __init__(self, tracked: Any, call: TfCall, specs: dict[str, InputSpec], names: list[str], jit: bool) -> None:
        super().__init__()
        self.tracked = tracked

        def serve(*inputs: tf.Tensor) -> dict[str, tf.Tensor]:
            return dict(zip(names, call(*inputs), strict=True))

        self.serve = tf.function(serve, input_signature=input_signature(specs), jit_compile=jit, autograph=False)

    def save(self, path: Path) -> None:
        tf.saved_model.save(self, str(path), signatures={SIGNATURE: self.serve})


class TfSource(SourceModel):
    """What Keras and SavedModel sources share once they have a TF callable."""

    tracked: Any  # the object owning the variables (Keras model or loaded SavedModel)
    call: TfCall

    def _check(self) -> None:
        outputs = self.probe(lambda example: self.call(*(tf.constant(v) for v in example.values())))
        self._names = output_names(self.config, len(outputs), self.field, self._own_output_names())

    def _own_output_names(self) -> list[str] | None:
        return None

    @property
    def output_names(self) -> list[str]:
        return self._names

    def predict(self, inputs: Arrays) -> Arrays:
        outputs = self.call(*(tf.constant(inputs[name]) for name in self.config.inputs))
        return {name: as_numpy(t) for name, t in zip(self._names, outputs, strict=True)}

    def serving_module(self, jit: bool) -> ServingModule:
        return ServingModule(self.tracked, self.call, self.config.inputs, self._names, jit)

    def export_onnx(self, path: Path, export: ExportConfig) -> dict[str, Any]:
        import tf2onnx

        from pipeline.core import onnx_files

        opset = min(export.opset, TF2ONNX_MAX_OPSET)
        serve = tf.function(lambda *inputs: self.call(*inputs), input_signature=input_signature(self.config.inputs),
                            autograph=False)  # fmt: skip
        start = time.perf_counter()
        text = any(spec.dtype == "str" for spec in self.config.inputs.values())
        model, _ = tf2onnx.convert.from_function(
            serve,
            input_signature=input_signature(self.config.inputs),
            opset=opset,
            # text operators as onnxruntime-extensions' (StringRegexReplace, StringToHashBucketFast, ...)
            extra_opset=[onnx_files.contrib_opset()] if text else None,
        )
        onnx_files.refuse_unknown_operators(model, f"tf2onnx {tf2onnx.__version__}")
        inlined = inline_captured_constants(model, serve, set(self.config.inputs))
        onnx_files.name_outputs(model, self._names)  # tf2onnx names them after TF tensors ('Identity:0')
        onnx_files.save(model, path)
        return {
            "exporter": f"tf2onnx {tf2onnx.__version__} (from_function)",
            "export_s": time.perf_counter() - start,
            **({"inlined_constants": inlined} if inlined else {}),
        }


def inline_captured_constants(model: Any, serve: Any, keep: set[str]) -> int:
    """Turn graph inputs that are constants the function captured back into initializers.

    tf2onnx freezes captured variables but leaves captured plain tensors (Keras 3's Normalization
    layer keeps its mean and variance as such; EfficientNet starts with one) as extra graph
    inputs, which no caller can feed. Their values are known: the function's captures."""
    import onnx

    function = serve.get_concrete_function()
    captured = {
        internal.name: external.numpy()
        for external, internal in zip(function.captured_inputs, function.graph.internal_captures, strict=True)
        if external.dtype != tf.resource
    }
    extra = [i for i in model.graph.input if i.name not in keep and i.name in captured]
    for value in extra:
        model.graph.input.remove(value)
        model.graph.initializer.append(onnx.numpy_helper.from_array(captured[value.name], value.name))
    return len(extra)


def as_list(result: Any) -> list[tf.Tensor]:
    if isinstance(result, dict):
        return list(result.values())
    if isinstance(result, list | tuple):
        return list(result)
    return [result]


class KerasSource(TfSource):
    """A Keras 3 model: a .keras file, or `factory` (+ optional weights file, else seeded init)."""

    kind = "keras"

    def __init__(self, name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> None:
        super().__init__(name, config, root, dims)
        self.tracked = self.model = load_keras_model(name, config, root, self)
        model = self.model
        self.call = lambda *inputs: as_list(model(list(inputs) if len(inputs) > 1 else inputs[0], training=False))
        self._check()

    def _own_output_names(self) -> list[str] | None:
        names = list(getattr(self.model, "output_names", None) or [])
        return names or None


def load_keras_model(name: str, config: ModelConfig, root: Path, source: SourceModel) -> Any:
    import keras

    field = f"catalog.{name}"
    if config.factory:
        factory = import_object(config.factory, root, f"{field}.factory")
        keras.utils.set_random_seed(config.init_seed)
        model = factory(**config.factory_args)
        if not isinstance(model, keras.Model):
            raise ConfigError(f"{PARAMS_FILE}: {field}.factory: returned {type(model).__name__}, expected keras.Model")
        if config.file:
            try:
                model.load_weights(str(source.require_file()))
            except Exception as error:
                raise ModelFileError(
                    f"{source.path}: weights do not load into {config.factory} ({PARAMS_FILE}: {field}.file): "
                    f"{first_line(error)}"
                ) from None
        return model
    path = source.require_file()
    try:
        return keras.saving.load_model(str(path), compile=False)
    except Exception as error:
        raise ModelFileError(
            f"{path}: not a readable Keras model ({PARAMS_FILE}: {field}.file): "
            f"{type(error).__name__}: {first_line(error)}"
        ) from None


class GraphSignature:
    """A SavedModel's serving signature read by the TF1 loader (rescue tf_keras2_saved_model: a folder
    TF2 cannot revive, Keras 2's optimizer slots): loaded in a graph session, its variables frozen,
    the graph wrapped back into a TF2 function (tf.compat.v1.wrap_function, pruned to the signature's
    tensors). It is called like TF2's concrete function, so the export and the tf_graph / tf_xla
    variants treat it as any other SavedModel's signature."""

    def __init__(self, path: Path) -> None:
        graph = tf.Graph()
        with graph.as_default(), tf.compat.v1.Session(graph=graph) as session:
            meta = tf.compat.v1.saved_model.loader.load(session, [tf.saved_model.SERVING], str(path))
            signature = meta.signature_def[SIGNATURE]
            outputs = sorted(signature.outputs)
            ops = [signature.outputs[key].name.split(":")[0] for key in outputs]
            frozen = tf.compat.v1.graph_util.convert_variables_to_constants(session, graph.as_graph_def(), ops)
        names = sorted(signature.inputs)
        wrapped = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(frozen, name=""), [])
        tensor = wrapped.graph.get_tensor_by_name
        self._pruned = wrapped.prune([tensor(signature.inputs[n].name) for n in names],
                                     [tensor(signature.outputs[k].name) for k in outputs])  # fmt: skip
        self._names, self.structured_outputs = names, {key: None for key in outputs}
        self.structured_input_signature = ((), {  # as TF2's concrete function gives it: specs by input name
            name: tf.TensorSpec(tf.TensorShape(signature.inputs[name].tensor_shape), signature.inputs[name].dtype, name)
            for name in names
        })  # fmt: skip

    def __call__(self, **inputs: Any) -> dict[str, tf.Tensor]:
        values = self._pruned(*(tf.convert_to_tensor(inputs[name]) for name in self._names))
        return dict(zip(self.structured_outputs, values, strict=True))


def serving_signature(path: Path) -> tuple[Any, Any, dict[str, Any]]:
    """The folder loaded (what owns its variables) and its serving signature: TF2's concrete function,
    or (rescue tf_keras2_saved_model) a GraphSignature, with the rescue's record ({}: not used). A folder
    neither loader reads raises TF2's error."""
    try:
        loaded = tf.saved_model.load(str(path))
        return loaded, loaded.signatures[SIGNATURE], {}
    except Exception as error:
        rescue = rescues.find("tf_keras2_saved_model", error)
        if rescue is None:
            raise
        try:
            graph = GraphSignature(path)
        except Exception:
            raise error from None
        return graph, graph, rescue.record(error)


class SavedModelSource(TfSource):
    """A TensorFlow SavedModel folder, called through its serving_default signature."""

    kind = "savedmodel"

    def __init__(self, name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> None:
        super().__init__(name, config, root, dims)
        path = self.require_file()
        try:
            self.tracked, signature, rescued = serving_signature(path)
        except Exception as error:
            raise ModelFileError(
                f"{path}: not a SavedModel with a '{SIGNATURE}' signature ({PARAMS_FILE}: {self.field}.file): "
                f"{type(error).__name__}: {first_line(error)}"
            ) from None
        if rescued:
            self.rescues.append(rescued)
        expected = sorted(signature.structured_input_signature[1])
        if expected != sorted(config.inputs):
            raise ConfigError(
                f"{PARAMS_FILE}: {self.field}.inputs: names {sorted(config.inputs)} do not match the "
                f"signature's inputs {expected} ({path})"
            )
        self._signature_outputs = sorted(signature.structured_outputs)
        names = list(config.inputs)
        keys = config.outputs if config.outputs and set(config.outputs) <= set(self._signature_outputs) else None
        self._order = keys or self._signature_outputs
        self.call = lambda *inputs: [signature(**dict(zip(names, inputs, strict=True)))[k] for k in self._order]
        self._check()

    def _own_output_names(self) -> list[str] | None:
        return self._signature_outputs


def load(name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> TfSource:
    source_class = KerasSource if config.source == "keras" else SavedModelSource
    return source_class(name, config, root, dims)
