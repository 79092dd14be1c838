"""params.yaml: load it once, validate all of it, and name the file and field of any mistake.

The file is grouped by stage (models/catalog, train, export, variants, bench, build). The schema
only: it imports no table of the registry (pipeline.core.registry), so a stage that reads params.yaml
(every stage: training too) does not depend on the registry's code. What needs the tables is checked
in the build layer: variant names, groups and skip lists and the constraints' runtimes against the
registry (pipeline.optimize.variant_lists), the knobs inside a variant's section by its pass's
`Config` (pipeline.optimize.knobs), both by `python -m pipeline check`, `python -m pipeline stages`
and the plan stage; reading params.yaml imports no pass. Which variants apply to which model is
pipeline.optimize.applicability's question.

Longer than a module should be because params.yaml is: one pydantic model per section, each field
with its bound and its description (the docs' knob tables are generated from them); split by section
it would scatter one file's schema over many.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from pipeline.core.errors import ConfigError
from pipeline.core.layout import PARAMS_FILE
from pipeline.core.validation import FieldError, validate

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_]+$")  # DVC stage names allow [A-Za-z0-9_-]; '-' joins matrix keys
# The registry's source kinds (pipeline.core.registry.SOURCES: tests/test_registry.py holds them equal),
# written out so that the schema imports no table; transformers: a Hugging Face model folder
SourceKind = Literal["torch", "onnx", "keras", "savedmodel", "tflite", "sklearn", "xgboost", "lightgbm", "catboost",
                     "jax", "transformers"]  # fmt: skip
TREE_SOURCES = ("xgboost", "lightgbm", "catboost")  # gradient-boosted trees in their library's own file
FILE_SOURCES = ("onnx", "savedmodel", "tflite", "sklearn", *TREE_SOURCES)  # a model file (or folder): `file`
ONNX_ML_SOURCES = ("onnx", "sklearn", *TREE_SOURCES)  # an ONNX file; skl2onnx's and the tree converters' exports
# What else each kind's entry must or may say: the schema's own tables, so that no check below names a kind
FACTORY_SOURCES = ("torch", "jax")  # the model's code: `factory` (module:function) builds it
FILE_OR_FACTORY = {  # a file, or a factory building the model: what the file is
    "keras": "a .keras file",
    "transformers": "the model folder: config.json, weights, tokenizer; a factory returns the model and tokenizer",
}
GENERATING_SOURCES = ("transformers",)  # a Hugging Face causal LM folder: measured as text generation
TORCH_EXPORT_SOURCES = ("torch",)  # torch_exporter chooses its ONNX exporter
# A graph the runtimes take as it is: scalar inputs, a batch axis after the first, output_rows, make_batch_dynamic
OWN_LAYOUT_SOURCES = ("onnx",)
VARIANT_GROUPS = ("variants", "machine_variants", "gpu_variants")  # params.yaml's lists of variants to build
DType = Literal["float32", "float16", "float64", "int64", "int32", "int8", "uint8", "bool", "str"]
# The task metric: a built-in (pipeline.core.task_metrics.BUILT_IN) or a user's function 'module:function'
BUILT_IN_METRICS = ("accuracy", "binary_accuracy", "f1", "cer", "none")
# What an output is judged as, when its values cannot tell: a pipeline.core.readings.READINGS name (all but strings,
# which a STRING tensor's dtype tells)
OutputKindName = Literal["class_scores", "probabilities", "embedding", "channels", "logits", "class_logits", "ctc",
                         "points", "ranking", "values"]  # fmt: skip


class Strict(BaseModel):
    """Unknown keys are errors: a misspelt knob must not be silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


InputKind = Literal["values", "token_ids", "attention_mask", "token_type_ids"]
TOKEN_KINDS = ("token_ids", "attention_mask", "token_type_ids")


class InputSpec(Strict):
    """One model input, its shape as the model takes it. One axis is the batch axis (`batch_axis`, the
    first unless declared: a recurrent state [layers, batch, hidden] has it second): a symbol (e.g.
    'batch') when the model takes any batch size, or a positive integer when the model fixes it (an
    ONNX file exported with batch 1, say). Any other dimension is a positive integer or a named symbol
    (e.g. 'seq') whose value for generated inputs and batch-1 latency comes from the model's `dims`.
    A scalar input (`shape: []`: a sample rate, a flag) is one `value` every call passes.

    Inside the pipeline every input is held rows first (`row_shape` after the rows: the batch axis
    moved to the front, a scalar repeated per row) so batching, splitting and fidelity work alike for
    all; `to_model` gives the model its own layout at the runtime's door (pipeline.runtimes.layout).

    `kind` says what the values mean, so generated inputs look like real ones: `token_ids` are
    uniform in [low, high) (high: the vocabulary size), `attention_mask` is a run of 1s then 0s
    (lengths seeded between `low`, default 1, and the full length), `token_type_ids` 0s then 1s.
    It also says what real values must be (inputs.check_input_values): token ids in [0, high), masks 0/1.
    """

    shape: list[int | str]
    dtype: DType = "float32"
    kind: InputKind = "values"
    low: float | None = None  # range of generated values when no data file is given
    high: float | None = None
    batch_axis: int = Field(default=0, ge=0, description="the batch axis's position in `shape` (a state: 1)")
    value: float | None = Field(default=None, description="a scalar input's value, passed on every call")

    @field_validator("shape")
    @classmethod
    def _dims(cls, shape: list[int | str]) -> list[int | str]:
        for dim in shape:
            if isinstance(dim, int) and dim <= 0:
                raise ValueError(f"dimensions must be positive integers or symbol names, got {dim!r}")
            if isinstance(dim, str) and not re.fullmatch(r"[A-Za-z_]\w*", dim):
                raise ValueError(f"a symbolic dimension must be a name (letters, digits, '_'), got {dim!r}")
        return shape

    @model_validator(mode="after")
    def _kind_fits_dtype(self) -> InputSpec:
        if self.kind in TOKEN_KINDS and not self.dtype.startswith("int"):
            raise FieldError("kind", f"{self.kind} inputs are integers; dtype {self.dtype} does not fit")
        if self.kind != "values" and len(self.row_shape) < 1:
            raise FieldError("kind", f"{self.kind} inputs have a sequence axis after the batch axis")
        if self.scalar != (self.value is not None):
            raise FieldError("value", "a scalar input (shape: []) needs its value; only a scalar input takes one")
        if self.shape and self.batch_axis >= len(self.shape):
            raise FieldError("batch_axis", f"{self.batch_axis} is past the last axis of shape {self.shape}")
        return self

    @property
    def scalar(self) -> bool:
        """A 0-d input: one value for the whole call, no batch axis."""
        return not self.shape

    @property
    def batch_dim(self) -> int | str:
        return self.shape[self.batch_axis]

    @property
    def fixed_batch(self) -> int | None:
        """The batch size the model is fixed to, or None when the batch axis is symbolic."""
        return self.batch_dim if isinstance(self.batch_dim, int) else None

    @property
    def row_shape(self) -> list[int | str]:
        """One row's axes, in the model's order, the batch axis taken out (a scalar: none)."""
        return [d for axis, d in enumerate(self.shape) if axis != self.batch_axis]

    @property
    def rows_first(self) -> bool:
        """The model takes the pipeline's layout as it is (no scalar, the batch axis first)."""
        return not self.scalar and self.batch_axis == 0

    @property
    def symbols(self) -> list[str]:
        """Symbolic dimensions besides the batch axis (they need a value from `dims`)."""
        return [d for d in self.row_shape if isinstance(d, str)]

    def shape_for(self, batch: int, dims: dict[str, int] | None = None) -> tuple[int, ...]:
        """The rows-first shape of `batch` rows (the pipeline's layout)."""
        dims = dims or {}
        return (batch, *(d if isinstance(d, int) else dims[d] for d in self.row_shape))

    def model_shape(self, batch: int, dims: dict[str, int] | None = None) -> tuple[int, ...]:
        """The shape the model takes for `batch` rows."""
        rows = list(self.shape_for(batch, dims))
        return () if self.scalar else (*rows[1 : self.batch_axis + 1], batch, *rows[self.batch_axis + 1 :])


class ModelConfig(Strict):
    """A model in the catalog. Its files live in models/<name>/ (the folder DVC watches)."""

    source: SourceKind
    file: str | None = Field(default=None, description="model file inside the model folder: weights, .onnx, ...")
    init_seed: int = Field(
        default=0, description="seeds the factory's own initialisation when a code model has no file"
    )
    factory: str | None = Field(default=None, description="'module:function' returning the model (code models)")
    factory_args: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[str, InputSpec] = Field(min_length=1)
    outputs: list[str] | None = None
    output_rows: dict[str, Annotated[int, Field(ge=0)]] = Field(
        default_factory=dict,
        description="output name -> its rows (batch) axis, where the ONNX file does not tell it (a CTC "
        "recogniser's logits [positions, batch, classes]: 1); over what the graph, the declared shape and a run say",
    )
    eval_data: str | None = None
    calib_data: str | None = None
    metric: str = Field(
        default="none",
        description="the task metric on labelled eval data: accuracy, binary_accuracy, f1 (multi-label at 0.5), "
        "cer (CTC greedy decode against label ids), none, or a function of yours, 'module:function' in the "
        "model's folder (pipeline.core.task_metrics)",
    )
    judged_as: dict[str, OutputKindName] = Field(
        default_factory=dict,
        description="an output's reading by name, when its values and name cannot tell: class_scores, "
        "probabilities, embedding, channels (a detector's grid), logits (read through a sigmoid), class_logits "
        "(read by argmax over the last axis), ctc (a CTC recogniser's [positions, classes]: its greedy-decoded "
        "string, blank 0), points (landmarks), values (no decision: cosine and largest error)",
    )
    point_tolerance: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict,
        description="how far a point of a points output may move, in the output's own units (pixels, say), by "
        "name (default: 1% of the span of the source's coordinates)",
    )
    point_dims: dict[str, Literal[2, 3]] = Field(
        default_factory=dict,
        description="coordinates per point of a points output, by name (default: 3 where its values per row "
        "divide by 3, else 2)",
    )
    decision_threshold: dict[str, Annotated[float, Field(gt=0, lt=1)]] = Field(
        default_factory=dict,
        description="the value at which an output's probabilities are read, by name (default 0.5; a detector's "
        "scores: 0.25)",
    )
    task: Literal["auto", "classification", "embedding", "other", "text-generation"] = Field(
        default="auto",
        description="classification: the first output holds class scores (top-1 agreement); "
        "embedding: the outputs are embeddings (neighbour recall; a sentence encoder); "
        "text-generation: a causal LM, built and measured as a generator (pipeline.measure.generation)",
    )
    dims: dict[str, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict, description="values of symbolic dimensions (e.g. seq: 128) for generated inputs"
    )
    dim_sweep: dict[str, list[Annotated[int, Field(ge=1)]]] = Field(
        default_factory=dict, description="batch-1 latency at each value of a symbolic dimension"
    )
    make_batch_dynamic: bool = False  # ONNX files with a fixed batch: try to relax it, keep it only if proven
    onnx_ml: bool = Field(
        default=False,
        description="the ONNX file (or a scikit-learn model's skl2onnx export) uses ONNX-ML operators (ai.onnx.ml); "
        "only the variants that run them as they are apply",
    )
    model_type: Literal["auto", "transformer", "cnn", "other"] = Field(
        default="auto", description="picks the quantization recipes; auto: attention patterns in the ONNX graph"
    )
    num_heads: int | None = Field(default=None, ge=1, description="attention heads (transformers; else from the model)")
    hidden_size: int | None = Field(default=None, ge=1, description="hidden size (transformers; else from the model)")
    torch_exporter: Literal["dynamo", "torchscript"] | None = Field(
        default=None, description="this model's torch.onnx exporter, over export.torch_exporter"
    )
    skip: list[str] = Field(default_factory=list)
    overrides: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="per-variant knobs for this model, over the variants.<name> sections"
    )

    @field_validator("factory")
    @classmethod
    def _factory_shape(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[\w.]+:[\w.]+", value):
            raise ValueError(f"expected 'module:function', got {value!r}")
        return value

    @field_validator("metric")
    @classmethod
    def _metric_name(cls, value: str) -> str:
        if value not in BUILT_IN_METRICS and not re.fullmatch(r"[\w.]+:[\w.]+", value):
            raise ValueError(f"expected one of {', '.join(BUILT_IN_METRICS)} or 'module:function', got {value!r}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _decoder_inputs(cls, data: Any) -> Any:
        """A decoder's one input is its token ids: the catalog need not spell it out."""
        if isinstance(data, dict) and data.get("task") == "text-generation" and "inputs" not in data:
            return data | {"inputs": {"input_ids": {"shape": ["batch", "seq"], "dtype": "int64", "kind": "token_ids"}}}
        return data

    @property
    def generates(self) -> bool:
        return self.task == "text-generation"

    @model_validator(mode="after")
    def _consistent(self) -> ModelConfig:
        if self.generates != (self.source in GENERATING_SOURCES):
            raise FieldError(
                "source" if self.generates else "task",
                f"text-generation models come as a Hugging Face causal LM folder (source: {GENERATING_SOURCES[0]}), "
                "and such a folder is measured as a text-generation model",
            )
        if self.source in FILE_OR_FACTORY and not (self.file or self.factory):
            what = FILE_OR_FACTORY[self.source]
            raise FieldError("file", f"{self.source} models need 'file:' ({what}) or 'factory:' (module:function)")
        if self.source in FACTORY_SOURCES and not self.factory:
            raise FieldError("factory", f"{self.source} models need 'factory: module:function' (the model's code)")
        if self.source in FILE_SOURCES and not self.file:
            raise FieldError("file", f"{self.source} models need 'file:' (a path inside models/<name>/)")
        self._check_dims()
        if self.torch_exporter and self.source not in TORCH_EXPORT_SOURCES:
            raise FieldError("torch_exporter", f"applies to torch models; this is a {self.source} model")
        if self.make_batch_dynamic and (self.source not in OWN_LAYOUT_SOURCES or self.fixed_batch is None):
            raise FieldError("make_batch_dynamic", "applies to ONNX files whose inputs fix the batch axis")
        if self.onnx_ml and self.source not in ONNX_ML_SOURCES:
            raise FieldError(
                "onnx_ml", f"applies to the kinds whose export may hold ONNX-ML operators ({ONNX_ML_SOURCES})"
            )
        if self.output_rows and self.source not in OWN_LAYOUT_SOURCES:
            raise FieldError("output_rows", "applies to ONNX files (source: onnx)")
        if unknown := sorted(set(self.output_rows) - set(self.outputs or self.output_rows)):
            raise FieldError(f"output_rows.{unknown[0]}", f"not an output (outputs: {self.outputs})")
        return self

    def _check_dims(self) -> None:
        """One batch axis for all inputs; every other symbol gets a value from `dims` or the eval data.
        Scalar inputs and batch axes after the first are read from ONNX files (their runtimes take the
        model's layout); code sources take rows first."""
        batched = [(name, spec) for name, spec in self.inputs.items() if not spec.scalar]
        if not batched:
            raise FieldError("inputs", "every input is a scalar: at least one input has a batch axis")
        for name, spec in self.inputs.items():
            if not spec.rows_first and self.source not in OWN_LAYOUT_SOURCES:
                field = "value" if spec.scalar else "batch_axis"
                raise FieldError(f"inputs.{name}.{field}", "scalar inputs and a batch axis after the first are "
                                 "supported for ONNX files (source: onnx)")  # fmt: skip
        first, *others = batched
        for name, spec in others:
            if spec.batch_dim != first[1].batch_dim:
                raise FieldError(
                    f"inputs.{name}.shape",
                    f"batch axis {spec.batch_dim!r} differs from {first[0]}'s {first[1].batch_dim!r} "
                    "(all inputs share one batch axis)",
                )
        batch, symbols = self.batch_dim, self.symbols
        for name in self.dims:
            if name == batch:
                raise FieldError(f"dims.{name}", "the batch axis takes every batch size the benchmark asks for")
            if name not in symbols:
                raise FieldError(f"dims.{name}", f"no input has a dimension named {name!r} (symbols: {symbols})")
        for name in symbols:
            if name not in self.dims and not self.eval_data and not self.generates:  # a decoder's windows: 128
                raise FieldError(
                    f"dims.{name}", f"symbolic dimension {name!r} needs a value (e.g. {name}: 128) or eval_data"
                )
        for name in self.dim_sweep:
            if name not in symbols:
                raise FieldError(f"dim_sweep.{name}", f"not a symbolic dimension after the batch axis ({symbols})")

    @property
    def class_scores(self) -> str | None:
        """How to read classes off the first output (a built-in class metric), or None when it holds no
        class scores (or only its values can tell)."""
        if self.metric in ("accuracy", "binary_accuracy"):
            return self.metric
        return "accuracy" if self.task == "classification" else None

    @property
    def embedding(self) -> bool:
        """The outputs are embeddings, judged by whether rows keep their nearest neighbours."""
        return self.task == "embedding"

    @property
    def batch_dim(self) -> int | str:
        return self.batched_input.batch_dim

    @property
    def fixed_batch(self) -> int | None:
        return self.batched_input.fixed_batch

    @property
    def batched_input(self) -> InputSpec:
        """The first input with a batch axis (a scalar input has none)."""
        return next(spec for spec in self.inputs.values() if not spec.scalar)

    @property
    def symbols(self) -> list[str]:
        """Symbolic dimensions after the batch axis, across inputs, in order of appearance."""
        return list(dict.fromkeys(s for spec in self.inputs.values() for s in spec.symbols))


class HoldOut(Strict):
    """Eval data without calib_data is split, seeded, into calibration rows, validation rows (what
    accuracy control tunes on) and scoring rows (the rest): no variant is scored on rows it was
    fitted to. Fractions of the eval rows."""

    calibration: float = Field(default=0.25, gt=0, lt=0.5)
    validation: float = Field(default=0.25, gt=0, lt=0.5)


class ExportConfig(Strict):
    opset: int = Field(default=20, ge=13, le=23)
    # auto: TorchScript for transformers (a module whose config declares attention heads), whose graph
    # ORT's transformer optimizer fuses (dynamo's: 0 Attention nodes, onnx_opt slower than onnx_fp32
    # on a pretrained MiniLM); dynamo for the rest
    torch_exporter: Literal["auto", "dynamo", "torchscript"] = "auto"
    atol: float = Field(default=1e-4, gt=0)
    rtol: float = Field(default=1e-3, ge=0)
    generated_samples: int = Field(default=256, ge=8)
    max_eval_samples: int = Field(default=2000, ge=8)
    seed: int = 0
    # Memory one batch of the source model's activations may take: reference prediction, parity
    # check, calibration, evaluation and the throughput sweep use batches that fit it (measured).
    memory_budget_mb: float = Field(default=3072, gt=0)
    split: HoldOut = Field(default_factory=lambda: HoldOut())


class WarmupConfig(Strict):
    iters: int = Field(default=20, ge=1)
    seconds: float = Field(default=0.3, ge=0)


class LatencyConfig(Strict):
    """Batch-1 latency, timed call by call in blocks of about `block_seconds` (pipeline.measure.harness).
    It stops once the 95% interval of the p50 (the order-statistic interval of the block medians'
    median) is within ±`target_pct`, after at least `min_blocks` blocks and `min_seconds`, or at
    `max_seconds`; a figure still wider than the target at the cap is flagged noisy. The figure
    screens; the select stage's side-by-side contest ranks the close ones."""

    target_pct: float = Field(default=5.0, gt=0)
    min_blocks: int = Field(default=10, ge=6)
    block_seconds: float = Field(default=0.02, gt=0)
    min_seconds: float = Field(default=0.2, ge=0)
    max_seconds: float = Field(default=1.5, gt=0)


class ThroughputConfig(Strict):
    """One synchronous caller per batch size, the same loop for every runtime, timed in blocks until
    the samples/s interval is within ±`target_pct` (at least `min_blocks`) or for `seconds` at most.
    The sweep stops at a batch whose gain over the previous one is confirmed below `min_gain_pct`
    (the upper end of the gain's interval), or before a batch whose single call takes longer than
    `max_call_s`. `concurrent_requests` batch-1 requests are then kept in flight (null: one per
    thread), each on its own session with its share of the threads (OpenVINO: its streams)."""

    batches: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [1, 8, 32, 128], min_length=1)
    seconds: float = Field(default=0.3, gt=0)
    target_pct: float = Field(default=5.0, gt=0)
    min_blocks: int = Field(default=6, ge=6)
    block_seconds: float = Field(default=0.03, gt=0)
    concurrent_seconds: float = Field(default=0.2, gt=0)
    min_gain_pct: float = Field(default=5.0, ge=0)
    max_call_s: float = Field(default=1.0, gt=0)
    concurrent_requests: int | None = Field(default=None, ge=1)


class GenerationBench(Strict):
    """How text-generation variants are measured (pipeline.measure.generation): greedy decoding of
    `new_tokens` after a prompt of each length (time to first token at each; time per output token
    at the first); tokens/s at each batch size; the peak footprint while one sequence grows to
    `context` tokens (weights, runtime and KV cache); perplexity, next-token agreement and logit
    cosine over `quality_rows` held-out windows. Each timed figure is the median of `repeats` runs."""

    prompt_lengths: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [16, 64], min_length=1)
    new_tokens: int = Field(default=32, ge=2)
    batches: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [1, 4], min_length=1)
    context: int = Field(default=256, ge=2)
    repeats: int = Field(default=5, ge=1)
    quality_rows: int = Field(default=32, ge=1)


class UnlabelledRows(Strict):
    """How many unlabelled scoring rows fidelity is computed on (pipeline.measure.budget.eval_rows): the
    fewest n whose worst row bounds the rest, n = ceil(ln(alpha) / ln(1 - worse_fraction)): with the
    worst of n rows observed, the chance that more than `worse_fraction` of all rows score worse than
    it is (1 - worse_fraction)^n <= alpha (0.01 and 0.05: 299 rows). A variant out of contention decides
    nothing with its fidelity, so it gets the bound of `out_of_contention_fraction` (0.05: 59 rows).
    Labelled rows are all kept: the accuracy delta needs them."""

    worse_fraction: float = Field(default=0.01, gt=0, lt=1)
    out_of_contention_fraction: float = Field(default=0.05, gt=0, lt=1)
    alpha: float = Field(default=0.05, gt=0, lt=1)


class BenchConfig(Strict):
    threads: int | Literal["auto"] = "auto"
    warmup: WarmupConfig = WarmupConfig()
    latency: LatencyConfig = LatencyConfig()
    throughput: ThroughputConfig = ThroughputConfig()
    # The out-of-contention screen (pipeline.measure.budget): a variant whose batch-1 p50 interval starts
    # above this many times the top of the best known p50 interval of the same model on this machine
    # stops its latency loop there and skips the throughput sweep, the concurrent figure and the dim
    # sweep; null: every variant gets the full budget. Not with select.objective throughput.
    contention_ratio: float | None = Field(default=3, gt=1)  # = select.contest.drift_ratio's default
    eval_batch: int = Field(default=64, ge=1)  # the most rows per accuracy/fidelity call
    unlabelled_rows: UnlabelledRows = UnlabelledRows()
    profile_calls: int = Field(default=20, ge=1)  # batch-1 runs under each runtime's operator profiler
    profile_calls_short: int = Field(default=5, ge=1)  # ... for a variant out of contention: its shares decide nothing
    timeout_s: float = Field(default=1800, gt=0)
    generation: GenerationBench = GenerationBench()

    @field_validator("threads")
    @classmethod
    def _positive(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError("threads must be a positive integer or 'auto'")
        return value

    def resolved_threads(self) -> int:
        """'auto' means one thread per core this process may run on."""
        if self.threads == "auto":
            return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return int(self.threads)


class Constraints(Strict):
    """What a deployable variant must satisfy; None means no limit."""

    # The task metric (labels; a built-in or your function): how far it may fall below the FP32 source's, in
    # its own units (absolute) or as a fraction of the source's value (relative). With a task metric it
    # decides; every output's decisions (below) are then context. `max_accuracy_drop` is its old name.
    max_metric_drop: float | None = Field(
        default=0.01, ge=0, validation_alias=AliasChoices("max_metric_drop", "max_accuracy_drop")
    )
    metric_drop: Literal["absolute", "relative"] = "absolute"
    # true: the outputs the task metric reads (a user's function: all; a built-in: the first) are judged by it
    # alone, as Olive's and NNCF's metrics judge; false: by it and by their decisions too
    metric_decides: bool = True
    # Independent probabilities (a sigmoid output, a grid's objectness and class channels): F1 of the variant's
    # decisions at the output's threshold against the source's (the flips a tagger or a detector would see)
    min_decision_f1: float | None = Field(default=0.99, gt=0, le=1)
    # Fidelity of every output against the FP32 source, on its worst scoring row: the cosine of
    # outputs with several values per row, the error relative to the output's range for outputs with
    # one value per row (a probability), where a cosine over the column hides a row that flipped.
    min_cosine: float | None = Field(default=0.98, gt=0, le=1)
    max_rel_error: float | None = Field(default=0.1, gt=0)
    # An output no reading fits (values: no decision found) is judged by its cosine and by its largest error
    # against its own largest magnitude, so that one moved value (a point, a raw score) shows
    max_value_error: float | None = Field(default=0.03, gt=0)
    # Points (landmarks, keypoints): the share of rows (faces, hands) whose every point stays within its
    # tolerance of the source's (point_tolerance in the catalog entry; default 1% of the coordinates' span)
    min_rows_within: float | None = Field(default=0.99, gt=0, le=1)
    # What the model is for: a classifier's top-1 class kept (share of scoring rows), an embedding's
    # nearest rows kept (recall@10 of the source's neighbours among the scoring rows)
    min_top1_agreement: float | None = Field(default=None, gt=0, le=1)
    min_neighbour_recall: float | None = Field(default=None, gt=0, le=1)  # only outputs declared embeddings
    # A grid whose channels live on different scales (a detector's boxes beside its class scores): each
    # channel's worst error relative to its own reference peak, in place of the row's cosine
    max_channel_error: float | None = Field(default=0.1, gt=0)
    # A tree ensemble's rows on its own split thresholds (and one float step either side): every decision there
    # as the library's, no tolerance (a moved threshold or a misread base score shows here first); an output that
    # decides nothing (a regression) is held there to max_rel_error as on the scoring rows
    exact_edge_decisions: bool = True
    # A ranking (a learning-to-rank model's score per row): the share of row pairs the source tells apart that the
    # variant keeps in the source's order, over all scoring rows (an order kept there is kept in every query)
    min_pairs_ordered: float | None = Field(default=0.999, gt=0, le=1)
    max_latency_ms: float | None = Field(default=None, gt=0)  # at select.percentile
    max_size_mb: float | None = Field(default=None, gt=0)
    max_ppl_increase_pct: float | None = Field(default=2.0, ge=0)  # text generation: perplexity vs the FP32 source
    max_memory_mb: float | None = Field(
        default=None, gt=0
    )  # footprint_mb: the runtime's peak RSS over the bare process
    variants: list[str] | None = None  # allowed variants (e.g. only those your serving stack runs)
    # allowed runtimes (onnxruntime, openvino, torch, tensorflow, jax): registry.RUNTIMES names,
    # checked by pipeline.optimize.variant_lists
    runtimes: list[str] | None = None
    devices: list[str] | None = None  # allowed devices: a kind (cpu, cuda) or a target (cuda:1)

    @field_validator("devices")
    @classmethod
    def _known_devices(cls, names: list[str] | None) -> list[str] | None:
        from pipeline.core.targets import Target

        for i, name in enumerate(names or []):
            try:
                Target.parse(name)
            except ValueError as error:
                raise FieldError(str(i), str(error)) from None
        return names


class ContestConfig(Strict):
    """The select stage's re-measure (pipeline.decide.contest): the variants whose stored latency
    interval overlaps the best one's, or whose stored p50 is within `drift_ratio` of it, at most
    `max_contenders`, are loaded side by side in one process and timed in alternating blocks of
    about `block_seconds` (at least `min_block_calls` calls, at most `max_block_seconds` of them),
    round after round, for at least `min_rounds` (`cap_min_rounds` when the race's pace cannot reach
    `min_rounds` within `max_seconds`) and `min_seconds` (long enough to see the machine change
    state), until every paired ratio's interval separates its variant from the leader by more
    than `tie_pct` or lies within ±`tie_pct` of 1, or `max_rounds`/`max_seconds` run out (the time
    cap waits for `cap_min_rounds` rounds, up to `cap_max_seconds`): the open ones are then ties; or as soon
    as no open one could close by then, its interval narrowed to the rounds the cap allows.
    Sooner when the race is decided beyond any drift: after `decisive_rounds`, once every contender's
    ratio interval starts above `decisive_ratio` (wider than one ratio ever moved across machine
    states, 0.48 to 0.76 within an hour: 1.58x), no state of the machine would reverse it.

    Each contender runs in worker processes of its own (`isolation: workers`), loaded as deployed, and only
    one runs at a time: a runtime in the same process moved the others' figures (a BlazeFace `.tflite` read
    x1.29 slower than OpenVINO in one process, x1.08 with each alone in its own). A contender is held by
    `processes` workers that take turns round by round, as each process draws its speed at start (one ONNX
    Runtime file read 8.8 us a call in some processes, 12.5-13.2 us in others): its ratio's interval then
    spans the draws instead of one draw deciding (pipeline.measure.contest.Draws). After each block its
    process waits until it is quiet before the next block starts: its CPU time, all threads, grows by less
    than `quiet_share` of one core in every `quiet_window_s` for `quiet_for_s` seconds (a block right after
    ONNX Runtime's ran slow for 10-30 ms more), or `settle_cap_s` pass (the record counts such blocks).
    `isolation: one process` loads every contender in the stage's process, as before (kept for
    benchmarks/contest_agreement.py, which shows the difference)."""

    enabled: bool = True
    max_contenders: int = Field(default=4, ge=2)
    drift_ratio: float = Field(default=3.0, ge=1)
    block_seconds: float = Field(default=0.01, gt=0)
    min_block_calls: int = Field(default=10, ge=1)
    max_block_seconds: float = Field(default=0.25, gt=0)
    min_rounds: int = Field(default=100, ge=3)
    min_seconds: float = Field(default=10.0, ge=0)
    max_rounds: int = Field(default=3000, ge=3)
    max_seconds: float = Field(default=30.0, gt=0)
    cap_min_rounds: int = Field(default=30, ge=0)
    cap_max_seconds: float = Field(default=180.0, gt=0)
    tie_pct: float = Field(default=3.0, ge=0)
    decisive_ratio: float = Field(default=1.6, gt=1)
    decisive_rounds: int = Field(default=10, ge=5)
    isolation: Literal["workers", "one process"] = "workers"
    processes: int = Field(default=2, ge=1)  # worker processes per contender, taking turns round by round
    warmup_seconds: float = Field(default=0.05, ge=0)  # each worker's warm-up: the bench's iterations, at least this
    quiet_window_s: float = Field(default=0.002, gt=0)  # how often a settling process's CPU time is read
    quiet_share: float = Field(default=0.1, gt=0, le=1)  # quiet: under this share of one core over a window
    quiet_for_s: float = Field(default=0.03, ge=0)  # and quiet this long before the next block starts
    settle_cap_s: float = Field(default=0.25, gt=0)  # a pool that spins longer is waited for this long

    @model_validator(mode="after")
    def _decisive_beyond_the_tie_band(self) -> ContestConfig:
        if self.decisive_ratio <= 1 + self.tie_pct / 100:  # an early stop must never end a race on an open pair
            raise FieldError("decisive_ratio", f"{self.decisive_ratio:g} must lie beyond the tie band, 1 + tie_pct/100")
        return self


class SelectConfig(Strict):
    """The select stage: constraints (global, and per model over them) and one objective."""

    objective: Literal["latency", "throughput", "size"] = "latency"
    percentile: Literal["p50", "p90", "p99"] = "p50"  # the latency percentile for objective and budget
    constraints: Constraints = Constraints()
    models: dict[str, dict[str, Any]] = Field(default_factory=dict)  # per-model constraint overrides
    contest: ContestConfig = Field(default_factory=lambda: ContestConfig())

    def constraints_for(self, model: str) -> Constraints:
        override = dict(self.models.get(model, {}))
        if "max_accuracy_drop" in override:  # the old name, over the new one's default
            override.setdefault("max_metric_drop", override.pop("max_accuracy_drop"))
        merged = self.constraints.model_dump() | override
        return validate(Constraints, merged, PARAMS_FILE, prefix=f"select.models.{model}")


class BuildConfig(Strict):
    timeout_s: float = Field(default=3600, gt=0)


class ServingConfig(Strict):
    """The engine releases deploy/<model>/serving/ is written for (pipeline/core/engine_versions.yaml)."""

    triton: str | None = None  # a Triton container release (yy.mm) in the table; null: the newest
    ovms: str | None = None  # an OpenVINO Model Server release (yyyy.n); null: the newest
    # load each artifact with the release's runtime version (pip, a cached side environment) and compare
    # its outputs with predict's; false: written unchecked, and the files say so
    check_versions: bool = True
    # at most this many seconds of batch-1 calls timing the artifact in each release's runtime version beside
    # this pipeline's, in alternating blocks, one process each (pipeline.serve.side_by_side), where the two
    # versions differ; sooner once the ratio's interval is within ±3%; 0: not timed
    compare_seconds: float = Field(default=3.0, ge=0)

    @model_validator(mode="after")
    def _known_releases(self) -> ServingConfig:
        from pipeline.core.engines import release

        for engine in ("triton", "ovms"):
            try:
                release(engine, getattr(self, engine))
            except KeyError as error:
                raise FieldError(engine, str(error.args[0])) from None
        return self


class Params(Strict):
    models: list[str] = Field(min_length=1)
    targets: list[str] = Field(default=["cpu"], min_length=1)  # cpu, cuda:N (pipeline.core.targets)
    catalog: dict[str, ModelConfig]
    train: dict[str, dict[str, Any]] = Field(default_factory=dict)
    export: ExportConfig = ExportConfig()
    variants: dict[str, dict[str, Any] | None] = Field(min_length=1)  # portable: built once, shared
    machine_variants: dict[str, dict[str, Any] | None] = Field(default_factory=dict)  # built on each machine
    gpu_variants: dict[str, dict[str, Any] | None] = Field(default_factory=dict)  # built and run on a cuda target
    bench: BenchConfig = BenchConfig()
    build: BuildConfig = BuildConfig()
    select: SelectConfig = SelectConfig()
    serving: ServingConfig = ServingConfig()

    @field_validator("targets")
    @classmethod
    def _known_targets(cls, targets: list[str]) -> list[str]:
        from pipeline.core.targets import Target

        parsed = []
        for i, name in enumerate(targets):
            try:
                parsed.append(str(Target.parse(name)))
            except ValueError as error:
                raise FieldError(str(i), str(error)) from None
        return parsed

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        groups = {
            "variants": self.variants,
            "machine_variants": self.machine_variants,
            "gpu_variants": self.gpu_variants,
        }
        seen: dict[str, str] = {}
        for group, names in groups.items():
            for name in names:
                if name in seen:
                    raise FieldError(f"{group}.{name}", f"also listed under '{seen[name]}': keep it in one group")
                seen[name] = group
        if self.gpu_variants and not any(t.startswith("cuda") for t in self.targets):
            raise FieldError("gpu_variants", 'GPU variants need a cuda target: add "cuda:0" to targets')
        for name in [*self.catalog, *self.all_variants]:
            if not NAME_PATTERN.match(name):
                raise ValueError(f"name {name!r} may use only letters, digits and '_' (it becomes a DVC stage name)")
        for i, name in enumerate(self.models):
            if name not in self.catalog:
                raise FieldError(
                    f"models.{i}", f"{name!r} has no entry under 'catalog' (known: {', '.join(self.catalog)})"
                )
        for i, name in enumerate(self.select.constraints.variants or []):
            if name not in self.all_variants:
                known = ", ".join(self.all_variants)
                raise FieldError(f"select.constraints.variants.{i}", f"{name!r} is not a variant (known: {known})")
        return self

    @property
    def all_variants(self) -> dict[str, dict[str, Any] | None]:
        """Every variant built for each model: portable, machine and GPU ones."""
        return self.variants | self.machine_variants | self.gpu_variants

    def group_of(self, variant: str) -> str:
        """The list of VARIANT_GROUPS that configures `variant` (`variants` when none does)."""
        return next((group for group in VARIANT_GROUPS if variant in getattr(self, group)), "variants")

    def model(self, name: str) -> ModelConfig:
        if name not in self.catalog:
            raise ConfigError(f"{PARAMS_FILE}: catalog.{name}: no such model (known: {', '.join(self.catalog)})")
        return self.catalog[name]

    def trained_models(self) -> list[str]:
        """The `train` entries whose model `models` names: what `dvc repro` trains (the others are
        opt-in zoo models, trained once someone lists them)."""
        return [model for model in self.train if model in self.models]

    def variant_params(self, name: str, model: str | None = None) -> dict[str, Any]:
        """The `variants.<name>` knobs, with `model`'s `overrides` for it applied on top."""
        if name not in self.all_variants:
            raise ConfigError(
                f"{PARAMS_FILE}: variants.{name}: not configured (configured: {', '.join(self.all_variants)})"
            )
        overrides = self.model(model).overrides.get(name, {}) if model else {}
        return dict(self.all_variants[name] or {}) | overrides


# libyaml's parser where PyYAML was built with it: every stage reads params.yaml (17 ms -> 2 ms)
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_params(path: Path | str = PARAMS_FILE) -> Params:
    """Read and validate params.yaml against the schema. What needs the registry's tables is checked
    by pipeline.optimize.variant_lists, the knobs inside variant sections and overrides by their
    passes (pipeline.optimize.knobs.check_variant_params): this reads no table and no pass."""
    path = Path(path)
    try:
        raw = yaml.load(path.read_text(), Loader=SAFE_LOADER)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found (run from the project root)") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}:{where}: not valid YAML: {getattr(error, 'problem', error)}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top level")
    params = validate(Params, raw, str(path))
    for model in params.select.models:
        params.model(model)
        unknown = set(params.select.constraints_for(model).variants or []) - set(params.all_variants)
        if unknown:
            raise ConfigError(f"{path}: select.models.{model}.variants: no such variant(s) {sorted(unknown)}")
    for model, config in params.catalog.items():
        for name in config.overrides:
            if name not in params.all_variants:
                raise ConfigError(f"{path}: catalog.{model}.overrides.{name}: not a configured variant")
    return params
