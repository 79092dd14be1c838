"""Rescues: the maintained path around a known failure of a library we call, as data.

Each entry names the library, the symptom (an exception's type, a piece of its text and, where that
matters, a function in its traceback; or a build process killed by a signal) and the remedy, which is
the library's own option or another maintained path. The step that meets the symptom applies the
remedy once and its record says so (`rescues` in a variant's build details or a source record):
which rescue, the library's version, what was seen and what was done. Any other failure stays the
honest failure it is, with its log. docs/variants.md lists the table for users.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass, field
from typing import Any

# A build process that dies by one of these on one CPU class is retried once with its runtime's
# conservative setting (CONSERVATIVE): a kernel chosen for that CPU (AMX, AVX-512 FP16) is the usual cause.
CRASH_SIGNALS = ("SIGFPE", "SIGILL", "SIGSEGV", "SIGBUS")


@dataclass(frozen=True)
class Rescue:
    """A known failure and its remedy. `errors`, `message` and `frame` recognise it: an exception whose
    class (or a base) is named in `errors`, whose text matches the regex `message` and, when `frame`
    is set, with that function in its traceback."""

    name: str  # how records and docs name it
    package: str  # the distribution whose behaviour it works around (its installed version is recorded)
    symptom: str  # what is seen, for people
    remedy: str  # what is done instead, for people
    errors: tuple[str, ...]  # exception class names (or signal names, for a crashed process)
    message: str = ""  # a regex searched in the error's text ("" matches any)
    frame: str = ""  # a function in the error's traceback ("" any)
    variants: tuple[str, ...] = ()  # the variants it applies to (() all the step's)
    setting: dict[str, Any] = field(default_factory=dict)  # what the remedy sets (a library option, a runtime setting)

    def matches(self, error: BaseException, variant: str = "") -> bool:
        if self.variants and variant not in self.variants:
            return False
        names = {kind.__name__ for kind in type(error).__mro__}
        if not names & set(self.errors) or not re.search(self.message, str(error)):
            return False
        return not self.frame or self.frame in {f.name for f in traceback.extract_tb(error.__traceback__)}

    def record(self, seen: BaseException | str, **found: Any) -> dict[str, Any]:
        """What a record says of the rescue: its name, the library's version, what was seen, what was done."""
        what = seen if isinstance(seen, str) else f"{type(seen).__name__}: {self.telling_line(str(seen))[:200]}"
        return {"rescue": self.name, "library": f"{self.package} {installed(self.package)}", "seen": what,
                "remedy": self.remedy, **({"setting": self.setting} if self.setting else {}), **found}  # fmt: skip

    def telling_line(self, text: str) -> str:
        """The error's line that shows the symptom (a converter's report starts with its own frame)."""
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()] or [""]
        line = next((line for line in lines if self.message and re.search(self.message, line)), lines[0])
        found = re.search(self.message, line) if self.message else None
        return "..." + line[found.start() :] if found and found.start() > 100 else line  # the symptom, not a preamble


def installed(package: str) -> str:
    """The installed version of `package`, or of the distribution that provides the module of that name
    (tensorflow is installed as the distribution tensorflow-cpu)."""
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    try:
        return version(package)
    except PackageNotFoundError:  # only then the map of every module to its distribution (1.5 s to build)
        pass
    for name in packages_distributions().get(package.replace("-", "_"), []):
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return "not installed"


RESCUES: tuple[Rescue, ...] = (
    Rescue(
        "ort_int32_bias_scale", "onnxruntime",
        "ORT's QDQ quantizer compares arrays with `if` when a bias meets a per-tensor weight scale of another "
        "shape (a paddle2onnx export)",
        "quantize again with quantize_static's extra_options QDQDisableWeightAdjustForInt32Bias=True (skips "
        "enlarging a weight's scale for a tiny int32 bias scale)",
        ("ValueError",), "truth value of an array", "_adjust_weight_scale_for_int32_bias",
        ("onnx_int8_static", "onnx_int8_static_search"), {"QDQDisableWeightAdjustForInt32Bias": True},
    ),
    Rescue(
        "ort_qdq_unloadable", "onnxruntime",
        "ORT's static quantizer wrote a QDQ graph ORT cannot load (a tf2onnx Conv1D: 'Invalid attribute perm' "
        "on a Transpose it inserted)",
        "quantize again in the QOperator format (QLinearConv, QLinearMatMul: no Q/DQ pairs around the "
        "transposes); the search then keeps what it finds in float",
        ("Fail", "InvalidGraph", "InvalidArgument", "RuntimeException", "NotImplemented"),
        variants=("onnx_int8_static", "onnx_int8_static_search"), setting={"quant_format": "QOperator"},
    ),
    Rescue(
        "if_on_known_scalar", "openvino",
        "OpenVINO's ONNX front end cannot convert an operation inside an If branch whose input rank is "
        "dynamic (silero-vad: the branch a scalar sample-rate input selects)",
        "the ONNX export specialised to the value each scalar input is declared to take on every call (its "
        "`value`, as a Constant), "
        "onnxscript's optimizer folding the If it selects, then converted; the artifact then has no such input, "
        "and the record names the values it is specialised to",
        ("OpConversionFailure",), "rank has to be known|Unsupported input type dynamic",
    ),
    Rescue(
        "nncf_accuracy_control_crash", "nncf",
        "nncf.quantize_with_accuracy_control raised inside NNCF (a KeyError in its graph traversal, "
        "nncf/common/graph/graph.py get_next_nodes, on a CTC recogniser with an LSTM)",
        "ONNX Runtime's sensitivity ranking on the exported ONNX (each quantized activation's SQNR on the "
        "validation rows) names the operations to keep in float; nncf.quantize runs again with the consumers "
        "of the 1, 2, 4, ... worst in its IgnoredScope until the validation rows keep max_drop",
        ("Exception",), variants=("openvino_int8_acc",),
    ),
    Rescue(
        "crash_conservative_runtime", "openvino",
        "the build process was killed by a signal (SIGFPE on an Intel Xeon with AMX: OpenVINO 2026.4's CPU "
        "plugin compiling the tiny decoder's IR in BF16 on exactly one inference thread)",
        "build again with the runtime's conservative setting for this CPU class: f32 inference precision "
        "(no AMX/BF16 kernels); the variant then runs with it everywhere it is measured and served",
        CRASH_SIGNALS,
    ),
    Rescue(
        "tf_keras2_saved_model", "tensorflow",
        "TensorFlow >= 2.16 cannot revive a SavedModel written with Keras 2 and its optimizer state "
        "('_UserObject' object has no attribute 'add_slot')",
        "load it with the TF1 loader (tf.compat.v1.saved_model.loader.load in a graph session), freeze its "
        "variables and wrap the graph back into a TF2 function (tf.compat.v1.wrap_function): tf2onnx and the "
        "tf_graph / tf_xla variants then read it as any SavedModel's signature",
        ("AttributeError", "ValueError", "KeyError", "TypeError"), "add_slot|_UserObject|optimizer|slot",
    ),
    Rescue(
        "string_normalizer_locale", "onnxruntime",
        "ONNX Runtime cannot open a graph whose StringNormalizer asks for a locale this machine lacks (skl2onnx "
        "writes none, which means en_US.UTF-8; minimal images have only C, C.UTF-8 and POSIX)",
        "set each such StringNormalizer's locale to one this machine has (C.UTF-8, else C): lower-casing then "
        "folds ASCII letters only; the record names the locale, and a serving image needs it",
        ("Fail", "RuntimeException"), "Failed to construct locale",
    ),
    Rescue(
        "checkpoint_dict", "torch",
        "the checkpoint is a training script's dict ({'model_state': ..., 'optimizer_state': ...}), not the "
        "model's state_dict",
        "load the state dict found under its usual key (state_dict, model_state_dict, model_state, model, "
        "net, module), without a 'module.' (DataParallel) prefix, leaving out tensors the module has not (a "
        "training loss's parameters); the key used and what was left out are recorded",
        ("RuntimeError", "KeyError"), "Missing key|Unexpected key",
    ),
)  # fmt: skip

BY_NAME = {rescue.name: rescue for rescue in RESCUES}

# The conservative setting per runtime (pipeline.runtimes), for crash_conservative_runtime: the runtime
# config entries that avoid the CPU-specific kernels. A runtime not listed has none: its crash stays failed.
CONSERVATIVE: dict[str, dict[str, Any]] = {
    "openvino": {"inference_precision": "f32"},
    "openvino-genai": {"inference_precision": "f32"},
}


def find(name: str, error: BaseException, variant: str = "") -> Rescue | None:
    """The rescue `name` when `error` is its symptom (for `variant`), else None."""
    rescue = BY_NAME[name]
    return rescue if rescue.matches(error, variant) else None
