"""The catalogue, as data: the third-party packages the pipeline imports, the source kinds, the
runtimes and the variants, with their lookups. Each variant declares what it applies to (source
kinds, tasks, the kind of target), what it needs (its runtime and the packages its pass imports), the
variant it rescues, and its pass by module path; each runtime names its adapter module and its packages.

This is the one place a backend is registered (docs/development.md, "Adding a backend"). Tables only:
the rules that read them to decide whether a variant is built are pipeline.optimize.applicability's,
and params.yaml is checked against them by pipeline.optimize.variant_lists (the schema,
pipeline.core.config, imports no table: an edit here retrains nothing). It imports nothing it names:
the build layer imports passes and validates their knobs (pipeline.optimize.knobs), pipeline.runtimes
imports the adapters, pipeline.prepare.sources the source loaders. Reading it costs no framework
import, and the packages table is the one list that the environment fingerprint
(pipeline.machine.fingerprint), the pyproject check (tests/test_registry.py) and skip reasons read.

Each VARIANTS entry is also data to the plan (pipeline.optimize.plan): a variant's stages depend on
its own entry's text, not on this whole file, so an edit to one entry reruns that variant's stages only.

Longer than a module should be because the catalogue is: one entry per variant, runtime, package and
source kind, in one table each, so an edit to a backend is one place to look.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.core.errors import ConfigError
from pipeline.core.layout import PARAMS_FILE
from pipeline.core.rescues import CONSERVATIVE, RESCUES


@dataclass(frozen=True)
class Package:
    """A third-party distribution the pipeline imports, keyed by its pip name (PACKAGES): the
    fingerprint records its version, so upgrading it reruns what depends on it."""

    modules: tuple[str, ...]  # the import names it provides (checked with importlib.util.find_spec)
    extra: str | None = None  # the pyproject.toml extra that installs it (gpu); None: [project] dependencies
    via: str | None = None  # not listed in pyproject.toml: installed as a dependency of this listed package
    optional: bool = False  # nothing installs it: used where the user installed it (recorded as absent elsewhere)
    alternatives: tuple[str, ...] = ()  # other distributions of the same modules (a GPU machine's onnxruntime-gpu)


# fmt: off
PACKAGES: dict[str, Package] = {
    "numpy": Package(("numpy",)),
    "torch": Package(("torch",)),
    "onnx": Package(("onnx",)),
    "onnxscript": Package(("onnxscript",)),  # torch.onnx's dynamo exporter
    "onnxruntime": Package(("onnxruntime",), alternatives=("onnxruntime-gpu",)),
    "onnxruntime-extensions": Package(("onnxruntime_extensions",)),  # its text operators (tf2onnx's string graphs)
    "onnxslim": Package(("onnxslim",)),
    "onnxconverter-common": Package(("onnxconverter_common",)),
    "openvino": Package(("openvino",)),
    "nncf": Package(("nncf",)),
    "tensorflow-cpu": Package(("tensorflow",), alternatives=("tensorflow",)),
    "keras": Package(("keras",), via="tensorflow-cpu"),
    "tf2onnx": Package(("tf2onnx",)),
    "ai-edge-litert": Package(("ai_edge_litert",)),  # the LiteRT interpreter: TFLite sources and their baseline
    "jax": Package(("jax",)),
    "jaxlib": Package(("jaxlib",)),
    "flax": Package(("flax",)),
    "optax": Package(("optax",)),  # trains the digits_jax zoo model
    "jax2onnx": Package(("jax2onnx",)),
    "torchax": Package(("torchax",), optional=True),  # torch_xla: PyTorch -> JAX
    "transformers": Package(("transformers",)),
    "onnxruntime-genai": Package(("onnxruntime_genai",)),  # the lm_onnx_* builder and runtime
    "openvino-genai": Package(("openvino_genai",)),  # the lm_openvino_* runtime
    "scikit-learn": Package(("sklearn",)),  # the zoo's data sets; scikit-learn sources and their baseline
    "skl2onnx": Package(("skl2onnx",)),  # scikit-learn sources' ONNX export
    # gradient-boosted trees: the libraries (sources and their baselines), their ONNX-ML converter, treelite
    "xgboost-cpu": Package(("xgboost",), alternatives=("xgboost",)),  # xgboost without its CUDA (nccl) wheels
    "lightgbm": Package(("lightgbm",)),
    "catboost": Package(("catboost",)),  # its own ONNX export too
    "onnxmltools": Package(("onnxmltools",)),
    "treelite": Package(("treelite",)),  # reads the libraries' files for tl2cgen
    "tl2cgen": Package(("tl2cgen",)),  # compiles a treelite model to C and runs the shared library
    "lleaves": Package(("lleaves",)),  # compiles a LightGBM model through LLVM and runs it
    "llvmlite": Package(("llvmlite",)),  # lleaves' LLVM (pinned below 0.45: lleaves 1.3 uses its legacy pass manager)
    "dvc": Package(("dvc",)),
    # NVIDIA GPU targets (docs/gpu.md): recorded in reports/env.json, where GPU figures are taken
    "onnxruntime-gpu": Package(("onnxruntime",), extra="gpu"),
    "tensorrt-cu13": Package(("tensorrt",), extra="gpu", alternatives=("tensorrt",)),
    "cuda-python": Package(("cuda.bindings",), extra="gpu"),
    "nvidia-ml-py": Package(("pynvml",), extra="gpu"),
}
# fmt: on


@dataclass(frozen=True)
class Source:
    """A source kind (catalog.<model>.source): how its models are loaded and exported, and what
    runs them natively."""

    loader: str | None  # module under pipeline.prepare.sources with load() -> SourceModel; None: a decoder folder
    baseline: str  # the variant that runs it the framework's own way: every speed-up is taken against it
    requires: tuple[str, ...]  # the packages (PACKAGES) its loader and ONNX converter import
    # `add` loads it as the export stage will (a factory's module built, a file's outputs run on the eval rows
    # and each output's reading said); the others' readings are found at export
    loaded_at_add: bool = False
    checks_file: bool = False  # `python -m pipeline check` runs the loader module's check_file(path, config, field)
    # the converter process's environment (pipeline.prepare.export): tf2onnx rewrites every node's protobuf after
    # each of its graph optimizers, and with protobuf's default upb backend the replaced copies stay in the
    # message's arena (VGG19, 548 MB of weights, grew 548 MB per pass, past 22 GB); the pure-Python backend frees
    # them (11.1 GB peak, in TF's freezing; 110 s)
    converter_env: tuple[tuple[str, str], ...] = ()


TF2ONNX_ENV = (("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python"),)  # Source.converter_env: why

# fmt: off
SOURCES: dict[str, Source] = {
    "torch": Source("pipeline.prepare.sources.pytorch", "torch_eager", ("torch", "onnx", "onnxscript"), True),
    "onnx": Source("pipeline.prepare.sources.onnxfile", "onnx_fp32", ("onnx", "onnxruntime"), True, checks_file=True),
    "keras": Source("pipeline.prepare.sources.tfkeras", "tf_graph", ("tensorflow-cpu", "keras", "tf2onnx", "onnx"),
                    converter_env=TF2ONNX_ENV),
    "savedmodel": Source("pipeline.prepare.sources.tfkeras", "tf_graph", ("tensorflow-cpu", "tf2onnx", "onnx"),
                         converter_env=TF2ONNX_ENV),
    "tflite": Source("pipeline.prepare.sources.tflite", "tflite",
                     ("ai-edge-litert", "tensorflow-cpu", "tf2onnx", "onnx"), True),
    "sklearn": Source("pipeline.prepare.sources.sklearn", "sklearn", ("scikit-learn", "skl2onnx", "onnx"), True),
    "xgboost": Source("pipeline.prepare.sources.trees", "xgboost", ("xgboost-cpu", "onnxmltools", "onnx"), True),
    "lightgbm": Source("pipeline.prepare.sources.trees", "lightgbm", ("lightgbm", "onnxmltools", "onnx"), True),
    "catboost": Source("pipeline.prepare.sources.trees", "catboost", ("catboost", "onnx"), True),
    "jax": Source("pipeline.prepare.sources.jaxfn", "jax_jit", ("jax", "jaxlib", "flax", "jax2onnx", "onnx"), True),
    # a Hugging Face causal LM folder (task: text-generation), exported by pipeline.prepare.decoder
    "transformers": Source(None, "lm_torch", ("transformers", "torch")),
}
# fmt: on

# The native way to run each source kind: every speed-up is taken against it.
BASELINES = {kind: source.baseline for kind, source in SOURCES.items()}


@dataclass(frozen=True)
class Runtime:
    """A runtime adapter: load(artifact, threads, config, target) -> Session (or a Generator), and
    unavailable_on(target) for non-CPU targets."""

    module: str  # under pipeline.runtimes
    requires: tuple[str, ...]  # the packages (PACKAGES) it imports; the first is the version a deployment records
    devices: tuple[str, ...] = ("cpu",)  # target kinds its adapter can run on
    strings: bool = False  # it feeds string tensors (dtype: str) and runs the graphs that read them

    @property
    def packages(self) -> tuple[str, ...]:
        """The import names that must be installed."""
        return tuple(PACKAGES[name].modules[0] for name in self.requires)

    @property
    def distribution(self) -> str:
        """The installed package whose version a deployment records."""
        return self.requires[0]


RUNTIMES: dict[str, Runtime] = {
    "onnxruntime": Runtime(
        "pipeline.runtimes.ort", ("onnxruntime", "onnxruntime-extensions"), ("cpu", "cuda"), strings=True
    ),
    "torch": Runtime("pipeline.runtimes.torch_rt", ("torch",), ("cpu", "cuda")),
    "tensorrt": Runtime("pipeline.runtimes.trt", ("tensorrt-cu13", "cuda-python"), ("cuda",)),
    "openvino": Runtime("pipeline.runtimes.ov", ("openvino",)),
    "tensorflow": Runtime("pipeline.runtimes.tf_rt", ("tensorflow-cpu",), strings=True),
    "litert": Runtime("pipeline.runtimes.litert", ("ai-edge-litert",)),
    "sklearn": Runtime("pipeline.runtimes.sklearn_rt", ("scikit-learn",), strings=True),
    "xgboost": Runtime("pipeline.runtimes.boosters", ("xgboost-cpu",)),
    "lightgbm": Runtime("pipeline.runtimes.boosters", ("lightgbm",)),
    "catboost": Runtime("pipeline.runtimes.boosters", ("catboost",)),
    "tl2cgen": Runtime("pipeline.runtimes.tl2cgen_rt", ("tl2cgen",)),  # a tree ensemble compiled to a shared library
    "lleaves": Runtime("pipeline.runtimes.lleaves_rt", ("lleaves", "llvmlite")),  # a LightGBM model compiled by LLVM
    "jax": Runtime("pipeline.runtimes.jax_rt", ("jax", "flax")),
    # generators (pipeline.runtimes.generator): text-generation variants
    "transformers": Runtime("pipeline.runtimes.lm_torch", ("transformers", "torch")),
    "onnxruntime-genai": Runtime("pipeline.runtimes.lm_ort", ("onnxruntime-genai",)),
    "openvino-genai": Runtime("pipeline.runtimes.lm_ov", ("openvino-genai",)),
}

# What a model does per call (a variant's `tasks`): one forward pass per batch (classification,
# embeddings, any other model), or decoding a causal LM with its KV cache (task: text-generation).
SINGLE_PASS, TEXT_GENERATION = "single-pass", "text-generation"
PREDICTS, GENERATES = frozenset({SINGLE_PASS}), frozenset({TEXT_GENERATION})


@dataclass(frozen=True)
class Variant:
    name: str
    summary: str
    runtime: str  # a RUNTIMES key: the adapter that loads and runs the artifact
    precision: str
    pass_ref: str  # "module:Class" under pipeline.optimize.passes: a Pass whose Config holds its params.yaml knobs
    sources: frozenset[str] | None = None  # source kinds it applies to; None: any, through the ONNX export
    device: str = "cpu"  # the kind of target it runs on (pipeline.core.targets)
    per_target: bool = False  # its artifact depends on the hardware that builds it: params.yaml machine_variants
    runtime_options: tuple[tuple[str, Any], ...] = ()  # fixed runtime_config entries (an ORT provider, say)
    should_beat: str | None = None  # the higher-precision variant of its runtime and target it must be faster than
    tasks: frozenset[str] = PREDICTS  # the model tasks it applies to (SINGLE_PASS, TEXT_GENERATION)
    requires: tuple[str, ...] = ()  # the packages (PACKAGES) its pass imports besides its runtime's
    # the variants it stands in for: built only when none of them, measured here, meets the model's constraints
    rescues: tuple[str, ...] = ()
    # runs a graph with ONNX-ML operators (ai.onnx.ml: tree ensembles, scalers) as it is; the others convert or
    # quantize only standard operators (an ONNX-ML graph would come out unchanged) or cannot read them (OpenVINO)
    onnx_ml: bool = False

    @property
    def needs_export(self) -> bool:
        return self.sources is None

    @property
    def generates(self) -> bool:
        """A text-generation variant (a decoder with its KV cache)."""
        return TEXT_GENERATION in self.tasks

    @property
    def pass_module(self) -> str:
        return self.pass_ref.partition(":")[0]

    @property
    def distributions(self) -> tuple[str, ...]:
        """Every package (PACKAGES) building and running it imports: its runtime's, then its pass's."""
        return tuple(dict.fromkeys((*RUNTIMES[self.runtime].requires, *self.requires)))


ONNX = ("onnx",)  # what the ONNX graph passes import
FP16 = (*ONNX, "onnxruntime")  # the FP16 pass converts with onnxruntime.transformers.float16
HF = ("transformers", "torch")  # what the decoder passes convert from

# fmt: off
VARIANTS: dict[str, Variant] = {v.name: v for v in [
    Variant("onnx_fp32", "the ONNX export as is", "onnxruntime", "fp32",
            "pipeline.optimize.passes.onnxruntime.export:AsExported", requires=ONNX, onnx_ml=True),
    Variant("onnx_opt", "ONNX Runtime offline graph optimization (+ onnxslim where it removes nodes)",
            "onnxruntime", "fp32", "pipeline.optimize.passes.onnxruntime.optimize:OrtOptimize",
            requires=(*ONNX, "onnxslim"), onnx_ml=True),
    Variant("onnx_fp16", "float16 weights and compute, FP32 inputs/outputs kept (onnxruntime.transformers.float16)",
            "onnxruntime", "fp16", "pipeline.optimize.passes.onnxruntime.fp16:Float16", should_beat="onnx_fp32",
            requires=FP16),
    Variant("onnx_int8_dynamic", "INT8 weights, activations quantized at run time (quantize_dynamic)",
            "onnxruntime", "int8", "pipeline.optimize.passes.onnxruntime.quantize_dynamic:DynamicInt8", per_target=True,
            should_beat="onnx_fp32", requires=ONNX),  # reduce_range: auto reads the building CPU's ISA
    Variant("onnx_int8_static", "INT8 QDQ calibrated on the calibration split (quantize_static)",
            "onnxruntime", "int8", "pipeline.optimize.passes.onnxruntime.quantize_static:StaticInt8", per_target=True,
            should_beat="onnx_fp32", requires=ONNX),
    Variant("onnx_int8_static_search", "onnx_int8_static's recipe with the consumers of the lowest-SQNR "
            "activations left float until the validation rows keep the task metric or the outputs' decisions",
            "onnxruntime", "int8", "pipeline.optimize.passes.onnxruntime.quantize_static:StaticInt8Search",
            per_target=True,
            should_beat="onnx_fp32", requires=ONNX, rescues=("onnx_int8_static",)),
    Variant("onnx_int8_blockwise", "MatMulNBits: 8-bit block-wise MatMul weights, activations quantized per "
            "block at run time (accuracy_level 4)", "onnxruntime", "int8",
            "pipeline.optimize.passes.onnxruntime.blockwise:MatMulNBits8", should_beat="onnx_fp32", requires=ONNX),
    Variant("openvino_fp32", "OpenVINO IR, FP32 weights, f32 inference pinned", "openvino", "fp32",
            "pipeline.optimize.passes.openvino.convert:OpenVinoFp32", requires=("torch",)),  # torch: frontend: source
    Variant("openvino_fp16", "OpenVINO IR, FP16-compressed weights", "openvino", "fp16",
            "pipeline.optimize.passes.openvino.convert:OpenVinoFp16", should_beat="openvino_fp32", requires=("torch",)),
    Variant("openvino_int8", "OpenVINO IR quantized by nncf.quantize on the calibration split",
            "openvino", "int8", "pipeline.optimize.passes.openvino.quantize:NncfInt8", should_beat="openvino_fp32",
            requires=("nncf", "torch")),
    Variant("openvino_int8_dynamic", "OpenVINO IR, INT8 weights (nncf.compress_weights), activations "
            "quantized per group at run time by the CPU plugin", "openvino", "int8",
            "pipeline.optimize.passes.openvino.quantize:NncfWeightsInt8DynamicActivations", should_beat="openvino_fp32",
            requires=("nncf", "torch")),
    Variant("openvino_int8_acc", "nncf.quantize_with_accuracy_control: INT8 within max_drop on the eval split",
            "openvino", "int8", "pipeline.optimize.passes.openvino.accuracy_control:NncfInt8AccuracyControl",
            should_beat="openvino_fp32",
            requires=("nncf", "torch"), rescues=("openvino_int8", "openvino_int8_dynamic")),
    Variant("torch_eager", "the PyTorch source model itself: the baseline", "torch", "fp32",
            "pipeline.optimize.passes.pytorch:TorchEager", frozenset({"torch"})),
    Variant("torch_compile", "AOTInductor package of the PyTorch source (torch.export + TorchInductor)",
            "torch", "fp32", "pipeline.optimize.passes.pytorch:TorchCompile", frozenset({"torch"}), per_target=True),
    Variant("torch_xla", "PyTorch source converted to JAX by torchax, exported like jax_xla", "jax", "fp32",
            "pipeline.optimize.passes.jax:TorchXla", frozenset({"torch"}), requires=("torch", "torchax", "jaxlib")),
    Variant("tf_graph", "the TF/Keras source as a SavedModel serving a plain tf.function", "tensorflow", "fp32",
            "pipeline.optimize.passes.tensorflow:TfGraph", frozenset({"keras", "savedmodel"})),
    Variant("tf_xla", "the same with tf.function(jit_compile=True): XLA-compiled at load", "tensorflow", "fp32",
            "pipeline.optimize.passes.tensorflow:TfXla", frozenset({"keras", "savedmodel"})),
    Variant("tflite", "the .tflite file as it ships, in the LiteRT interpreter with XNNPACK: the baseline",
            "litert", "fp32", "pipeline.optimize.passes.tflite:AsShipped", frozenset({"tflite"})),
    Variant("sklearn", "the scikit-learn estimator as it was saved (predict_proba / predict): the baseline",
            "sklearn", "fp32", "pipeline.optimize.passes.sklearn:AsSaved", frozenset({"sklearn"}), onnx_ml=True),
    Variant("xgboost", "the XGBoost model file as it ships, XGBoost's inplace_predict: the baseline", "xgboost",
            "fp32", "pipeline.optimize.passes.trees:AsSaved", frozenset({"xgboost"}), onnx_ml=True),
    Variant("lightgbm", "the LightGBM model file as it ships, LightGBM's Booster.predict: the baseline", "lightgbm",
            "fp32", "pipeline.optimize.passes.trees:AsSaved", frozenset({"lightgbm"}), onnx_ml=True),
    Variant("catboost", "the CatBoost model file as it ships, CatBoost's own predict: the baseline", "catboost",
            "fp32", "pipeline.optimize.passes.trees:AsSaved", frozenset({"catboost"}), onnx_ml=True),
    Variant("treelite", "the trees compiled to native code (treelite + tl2cgen, gcc), run by tl2cgen's Predictor",
            "tl2cgen", "fp32", "pipeline.optimize.passes.trees:Treelite", frozenset({"xgboost", "lightgbm"}),
            requires=("treelite",), onnx_ml=True),  # gcc's default flags: portable across x86-64 CPUs
    Variant("lleaves", "the LightGBM trees compiled to native code by lleaves (LLVM), LightGBM's float64 thresholds",
            "lleaves", "fp32", "pipeline.optimize.passes.trees:Lleaves", frozenset({"lightgbm"}), onnx_ml=True),
    Variant("jax_jit", "the JAX source's apply function under jax.jit", "jax", "fp32",
            "pipeline.optimize.passes.jax:JaxJit", frozenset({"jax"}), requires=("jaxlib",)),
    Variant("jax_xla", "jax.export of the jitted function (StableHLO), compiled at load", "jax", "fp32",
            "pipeline.optimize.passes.jax:JaxXla", frozenset({"jax"}), requires=("jaxlib",)),
    # Text generation (task: text-generation): a causal LM with its KV cache, greedy decoding.
    Variant("lm_torch", "the Hugging Face model in PyTorch, decoding with its KV cache: the baseline",
            "transformers", "fp32", "pipeline.optimize.passes.pytorch:LmTorch", frozenset({"transformers"}),
            tasks=GENERATES),
    Variant("lm_onnx_fp32", "ONNX with past key/values by onnxruntime-genai's model builder, run by "
            "onnxruntime-genai", "onnxruntime-genai", "fp32", "pipeline.optimize.passes.onnxruntime.genai:GenaiFp32",
            frozenset({"transformers"}), tasks=GENERATES, requires=(*HF, "onnx")),
    Variant("lm_onnx_int8", "the builder's ONNX with weight-only INT8 MatMulNBits (block-wise, RTN)",
            "onnxruntime-genai", "int8", "pipeline.optimize.passes.onnxruntime.genai:GenaiInt8",
            frozenset({"transformers"}), tasks=GENERATES, should_beat="lm_onnx_fp32", requires=(*HF, "onnx")),
    Variant("lm_onnx_int4", "the builder's ONNX with weight-only INT4 MatMulNBits (block-wise, RTN)",
            "onnxruntime-genai", "int4", "pipeline.optimize.passes.onnxruntime.genai:GenaiInt4",
            frozenset({"transformers"}), tasks=GENERATES, should_beat="lm_onnx_fp32", requires=(*HF, "onnx")),
    Variant("lm_openvino_fp32", "stateful OpenVINO IR (KV cache as model state), f32 inference and KV cache "
            "pinned, run by openvino-genai", "openvino-genai", "fp32",
            "pipeline.optimize.passes.openvino.decoder:OvFp32", frozenset({"transformers"}), tasks=GENERATES,
            requires=(*HF, "openvino")),
    Variant("lm_openvino_fp16", "the stateful IR with FP16 weights; the CPU plugin's own inference and KV-cache "
            "precision (bf16 and u8 where the CPU has them)", "openvino-genai", "fp16",
            "pipeline.optimize.passes.openvino.decoder:OvFp16", frozenset({"transformers"}), tasks=GENERATES,
            should_beat="lm_openvino_fp32", requires=(*HF, "openvino")),
    Variant("lm_openvino_int8", "the stateful IR with weights compressed to INT8 by nncf.compress_weights",
            "openvino-genai", "int8", "pipeline.optimize.passes.openvino.decoder:OvInt8", frozenset({"transformers"}),
            tasks=GENERATES, should_beat="lm_openvino_fp32", requires=(*HF, "openvino", "nncf")),
    Variant("lm_openvino_int4", "the stateful IR with weights compressed to INT4 (group-wise) by "
            "nncf.compress_weights", "openvino-genai", "int4", "pipeline.optimize.passes.openvino.decoder:OvInt4",
            frozenset({"transformers"}), tasks=GENERATES, should_beat="lm_openvino_fp32",
            requires=(*HF, "openvino", "nncf")),
    # GPU targets (NVIDIA, CUDA): skipped with the target probe's reason where there is none.
    Variant("onnx_cuda_fp32", "the ONNX export on ONNX Runtime's CUDA execution provider", "onnxruntime",
            "fp32", "pipeline.optimize.passes.onnxruntime.export:AsExported", device="cuda", per_target=True,
            runtime_options=(("provider", "cuda"),), requires=ONNX, onnx_ml=True),
    Variant("onnx_cuda_fp16", "onnx_fp16's FP16 graph on ONNX Runtime's CUDA execution provider", "onnxruntime",
            "fp16", "pipeline.optimize.passes.onnxruntime.fp16:Float16", device="cuda", per_target=True,
            runtime_options=(("provider", "cuda"),), should_beat="onnx_cuda_fp32", requires=FP16),
    Variant("onnx_trt_fp16", "ONNX Runtime's TensorRT execution provider, FP16 enabled, engine cached in "
            "the artifact", "onnxruntime", "fp16", "pipeline.optimize.passes.tensorrt:OrtTensorRt", device="cuda",
            per_target=True, runtime_options=(("provider", "tensorrt"), ("fp16", True)), requires=ONNX),
    Variant("onnx_trt_int8", "the QDQ INT8 model (onnx_int8_static's recipe) on the TensorRT execution "
            "provider: explicit quantization, no calibration table", "onnxruntime", "int8",
            "pipeline.optimize.passes.tensorrt:OrtTensorRtQdq", device="cuda", per_target=True,
            runtime_options=(("provider", "tensorrt"), ("fp16", True), ("int8", True)),
            should_beat="onnx_trt_fp16", requires=ONNX),
    Variant("tensorrt_fp16", "onnx_fp16's graph built into a TensorRT engine (tensorrt API, strongly typed)",
            "tensorrt", "fp16", "pipeline.optimize.passes.tensorrt:EngineFp16", device="cuda", per_target=True,
            requires=FP16),
    Variant("tensorrt_int8", "a TensorRT engine of the QDQ INT8 model (explicit quantization)",
            "tensorrt", "int8", "pipeline.optimize.passes.tensorrt:EngineInt8", device="cuda", per_target=True,
            should_beat="tensorrt_fp16", requires=(*ONNX, "onnxruntime")),  # onnxruntime: its QDQ quantizer
    Variant("torch_compile_cuda", "AOTInductor package of the PyTorch source compiled for CUDA", "torch",
            "fp32", "pipeline.optimize.passes.pytorch:TorchCompile", frozenset({"torch"}), device="cuda",
            per_target=True),
]}
# fmt: on

# The variants most often fastest on a CPU, in that order: of those configured, the first that applies to
# a model is benched before its others (its select stage lists that record first, and DVC runs a stage's
# dependencies in the order listed), so the out-of-contention screen (pipeline.measure.budget) has a fast
# figure to compare the slower variants with and cuts their benches short. An order only: the figures that
# decide (the contest's) are measured alike whichever variant comes first.
BENCH_FIRST = ("openvino_int8", "onnx_int8_static", "openvino_int8_dynamic", "onnx_int8_dynamic",
               "lm_onnx_int8", "lm_openvino_int8")  # fmt: skip


def _check_references() -> None:
    """Every name the tables use is declared, and every module path lies in its layer: a new entry
    with a typo stops at import with the entry's name, not at the first stage that reads it."""
    layers = {
        "pass": "pipeline.optimize.passes.",
        "runtime": "pipeline.runtimes.",
        "loader": "pipeline.prepare.sources.",
    }

    def need(ok: bool, where: str, what: str) -> None:
        if not ok:
            raise ValueError(f"pipeline/core/registry.py: {where}: {what}")

    def packages(names: tuple[str, ...], where: str) -> None:
        for name in names:
            need(name in PACKAGES, where, f"package {name!r} is not in PACKAGES")

    for name, package in PACKAGES.items():
        need(package.via is None or package.via in PACKAGES, f"PACKAGES[{name!r}]", f"via {package.via!r} unknown")
    for kind, source in SOURCES.items():
        packages(source.requires, f"SOURCES[{kind!r}]")
        need(source.baseline in VARIANTS, f"SOURCES[{kind!r}]", f"baseline {source.baseline!r} is not a variant")
        loader_ok = source.loader is None or source.loader.startswith(layers["loader"])
        need(loader_ok, f"SOURCES[{kind!r}]", f"its loader lives under {layers['loader']}")
    for name, runtime in RUNTIMES.items():
        packages(runtime.requires, f"RUNTIMES[{name!r}]")
        need(bool(runtime.requires), f"RUNTIMES[{name!r}]", "requires names no package")
        need(runtime.module.startswith(layers["runtime"]), f"RUNTIMES[{name!r}]", f"lives under {layers['runtime']}")
    for name, v in VARIANTS.items():
        where = f"VARIANTS[{name!r}]"
        packages(v.requires, where)
        need(v.runtime in RUNTIMES, where, f"runtime {v.runtime!r} is not in RUNTIMES")
        need(v.device in RUNTIMES[v.runtime].devices, where, f"the {v.runtime} adapter does not run on {v.device}")
        need(v.sources is None or v.sources <= set(SOURCES), where, f"unknown source kind in {sorted(v.sources or ())}")
        need(bool(v.tasks) and v.tasks <= {SINGLE_PASS, TEXT_GENERATION}, where, f"unknown task in {sorted(v.tasks)}")
        pass_ok = v.pass_ref.startswith(layers["pass"]) and ":" in v.pass_ref
        need(pass_ok, where, f"its pass is 'module:Class' under {layers['pass']}")
        for other in (v.should_beat, *v.rescues):
            need(other is None or other in VARIANTS, where, f"{other!r} (should_beat or rescues) is not a variant")
        for rescued in v.rescues:
            same_place = (VARIANTS[rescued].runtime, VARIANTS[rescued].device) == (v.runtime, v.device)
            need(same_place, where, f"rescues {rescued!r}, which has another runtime or device")
    for name in BENCH_FIRST:
        need(name in VARIANTS, "BENCH_FIRST", f"{name!r} is not a variant")
    for rescue in RESCUES:
        for name in rescue.variants:
            need(name in VARIANTS, f"rescues.RESCUES[{rescue.name!r}]", f"{name!r} is not a variant")
    for runtime in CONSERVATIVE:
        need(runtime in RUNTIMES, "rescues.CONSERVATIVE", f"{runtime!r} is not a runtime")


_check_references()


def ordered(names: object) -> list[str]:
    """`names` (any container of variant names) in catalogue order: how tables list variants."""
    return [name for name in VARIANTS if name in names]


def should_beat(precision: str) -> dict[str, str]:
    """{variant: the variant it must be faster than} for the variants of one precision (fp16, int8)."""
    return {v.name: v.should_beat for v in VARIANTS.values() if v.should_beat and v.precision == precision}


def get(name: str, source: str = PARAMS_FILE, section: str = "variants") -> Variant:
    """Variant `name`, or a ConfigError naming `section.name` in `source` (a params.yaml)."""
    if name not in VARIANTS:
        raise ConfigError(f"{source}: {section}.{name}: unknown variant (known: {', '.join(VARIANTS)})")
    return VARIANTS[name]
