"""Whether a variant is built for a model, and why not: every rule, in one place, each giving one
typed `Skip` (its Kind and a reason) or None. RULES lists them (docs/variants.md, "Why a variant is
not built", is generated from it).

Two callers ask, at two moments:
- the stage files (`not_applicable`, `applicable_models`, `deciding_records`): which pairs get
  stages at all, decided from params.yaml and the registry's data alone (pipeline.stagefile writes
  them and orders each model's benches; the select record lists the others once, with why);
- the build stage (`why_not_built`, pipeline.optimize.stage): the same rules first, then those
  that need this machine, the export's record or the records of the variants a fallback rescues,
  all before any process starts.

A pass's own questions (Pass.not_for, Pass.nothing_to_gain) and a runtime adapter's
(unavailable_on) stay declared where they belong and are asked from here. A pass raises
NotApplicable (or Unavailable) only for what it finds while running (nothing was quantized, an
architecture its converter does not support): pipeline.core.isolate carries that kind back.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pipeline.core import layout, records, registry
from pipeline.core.config import ModelConfig, Params
from pipeline.core.files import read_json
from pipeline.core.layout import PARAMS_FILE
from pipeline.core.outcome import Kind, Skip
from pipeline.core.quality import quality_violations
from pipeline.core.records.env import Probe
from pipeline.core.records.source import Family, SourceRecord
from pipeline.core.registry import (
    PACKAGES,
    RUNTIMES,
    SINGLE_PASS,
    TEXT_GENERATION,
    VARIANTS,
    Variant,
)
from pipeline.core.targets import target_for


class Pass(Protocol):
    """The questions a pass declares (pipeline.optimize.passes.base.Pass), asked here: named by shape,
    so the plan's callers (the select and report stages) import no pass code."""

    def not_for(self, config: Any, family: Family) -> str | None: ...
    def nothing_to_gain(self, config: Any, rescued: str, record: records.VariantRecord) -> str | None: ...


PLAN = "the plan: no stages"
BUILD = "the build stage, before any process"
RUNNING = "the build process, while the pass runs"


@dataclass(frozen=True)
class Rule:
    """One reason a variant is not built: what rules it out, the Kind it records, where it is asked."""

    rule: str
    kind: Kind
    asked: str
    by: str  # the function (or hook) that asks it


RULES = (
    Rule("listed in the model's catalog entry `skip`", Kind.NOT_APPLICABLE, PLAN, "never_applies"),
    Rule("the model's task (text generation or a single pass) is not one the variant does",
         Kind.NOT_APPLICABLE, PLAN, "never_applies"),
    Rule("the model's source kind is not one the variant takes (its `sources`)", Kind.NOT_APPLICABLE, PLAN,
         "never_applies"),
    Rule("the model uses ONNX-ML operators the variant cannot run", Kind.NOT_APPLICABLE, PLAN, "never_applies"),
    Rule("the model takes string inputs, which the variant's runtime cannot feed", Kind.NOT_APPLICABLE, PLAN,
         "never_applies"),
    Rule("`targets` names no target of the variant's device", Kind.NOT_APPLICABLE, PLAN, "never_applies"),
    Rule("the target is not usable on this machine (reports/env.json's probe)", Kind.UNAVAILABLE, BUILD,
         "unavailable"),
    Rule("a package of the variant's runtime is not installed, or its adapter does not run on the target's kind",
         Kind.UNAVAILABLE, BUILD, "runtime_unavailable"),
    Rule("an optional package the variant's pass imports is not installed", Kind.UNAVAILABLE, BUILD,
         "optional_missing"),
    Rule("the runtime's adapter cannot use this GPU (a CPU-only build of its framework)", Kind.UNAVAILABLE, BUILD,
         "runtime_unavailable: the adapter's unavailable_on"),
    Rule("the pass does not suit the export's model family (dynamic INT8 for a CNN)", Kind.NOT_APPLICABLE, BUILD,
         "not_for_family: Pass.not_for"),
    Rule("an INT8 variant of a source that is already INT8 throughout (a full-integer TFLite file)",
         Kind.NOT_APPLICABLE, BUILD, "already_integer"),
    Rule("a fallback whose rescued variant, measured here, meets the model's quality constraints",
         Kind.NOT_NEEDED, BUILD, "not_needed"),
    Rule("a fallback whose work could not improve on the rescued variants' records", Kind.NOT_APPLICABLE, BUILD,
         "nothing_to_gain: Pass.nothing_to_gain"),
    Rule("what the pass finds while running (an unsupported architecture, nothing to quantize) or the build "
         "finds in its artifact (no quantized operator)", Kind.NOT_APPLICABLE, RUNNING, "raise NotApplicable"),
    Rule("an optional package that is installed but does not import", Kind.UNAVAILABLE, RUNNING,
         "raise Unavailable"),
)  # fmt: skip


def task_of(config: ModelConfig) -> str:
    """The task a catalog model's variants must support (Variant.tasks)."""
    return TEXT_GENERATION if config.generates else SINGLE_PASS


def never_applies(variant: Variant, model: str, config: ModelConfig, target: str | None) -> Skip | None:
    """Why `variant` can never apply to `model` as params.yaml describes it (its catalog entry's skip
    list, its task, its source kind, ONNX-ML operators, string inputs; `target`: the configured target of the
    variant's device, None when there is none), or None.

    Decided from data before any process starts: such a pair gets no stage at all (pipeline.stagefile),
    and the select record, summary and report list it once with this reason."""
    if variant.name in config.skip:
        return Skip(Kind.NOT_APPLICABLE, f"disabled for this model ({PARAMS_FILE}: catalog.{model}.skip)")
    if task_of(config) not in variant.tasks:
        kind = "text-generation" if variant.generates else "single-pass (non-generative)"
        return Skip(
            Kind.NOT_APPLICABLE,
            f"a {kind} variant; {model} is {'a text-generation' if config.generates else 'not a text-generation'} "
            "model",
        )
    if variant.sources is not None and config.source not in variant.sources:
        return Skip(
            Kind.NOT_APPLICABLE,
            f"needs a {' or '.join(sorted(variant.sources))} source; {model} is a {config.source} model",
        )
    if config.onnx_ml and not variant.onnx_ml:
        which = (
            f"which {variant.runtime} cannot read"
            if variant.runtime != "onnxruntime"
            else "which this variant's pass leaves as they are (it converts standard operators only)"
        )
        return Skip(Kind.NOT_APPLICABLE, f"{model} uses ONNX-ML operators (ai.onnx.ml), {which}")
    if not RUNTIMES[variant.runtime].strings and (texts := [n for n, s in config.inputs.items() if s.dtype == "str"]):
        return Skip(
            Kind.NOT_APPLICABLE,
            f"{model} takes strings ({', '.join(texts)}: dtype str), which {variant.runtime} cannot feed or run the "
            "graph's string operators on",
        )
    if target is None:
        return Skip(
            Kind.NOT_APPLICABLE,
            f"runs on {variant.device}; {PARAMS_FILE}: targets names no {variant.device} target",
        )
    return None


def unavailable(variant: Variant, target: str, probe: Probe) -> Skip | None:
    """Why `variant` cannot be built on `target` (probed as `probe`) on this machine, or None: the
    target's probe, its runtime's packages and device kinds, an optional package of its pass, then on
    a GPU the runtime adapter's own question (a CPU-only build of torch, onnxruntime without its CUDA
    provider)."""
    if not probe.available:
        return Skip(Kind.UNAVAILABLE, f"target {target} is not usable here: {probe.reason}")
    runtime = variant.runtime
    missing = _not_installed_or_other_device(runtime, target) or optional_missing(variant) or _refused(runtime, target)
    return Skip(Kind.UNAVAILABLE, missing) if missing else None


def runtime_unavailable(name: str, target: str = "cpu") -> str | None:
    """Why runtime `name` cannot run on `target` on this machine, or None when it can: the registry's
    data first (its packages installed, its adapter runs on this kind of target), then on a GPU the
    adapter's own `unavailable_on` (a CPU-only build of torch, onnxruntime without its CUDA provider)."""
    return _not_installed_or_other_device(name, target) or _refused(name, target)


def _refused(name: str, target: str) -> str | None:
    """The runtime adapter's own answer on a non-CPU target (imports the adapter)."""
    if target.partition(":")[0] == "cpu":
        return None
    return importlib.import_module(RUNTIMES[name].module).unavailable_on(target)


def _not_installed_or_other_device(name: str, target: str) -> str | None:
    """Runtime `name`'s packages missing here, or `target`'s kind not one its adapter runs on (the
    registry's data: no import)."""
    runtime = RUNTIMES[name]
    missing = [package for package in runtime.requires if _missing(PACKAGES[package].modules[0])]
    if missing:
        extras = sorted({extra for package in missing if (extra := PACKAGES[package].extra)})
        hint = f" (pip install -e '.[{','.join(extras)}]')" if extras else ""
        return f"{', '.join(PACKAGES[package].modules[0] for package in missing)} is not installed{hint}"
    kind = target.partition(":")[0]
    if kind not in runtime.devices:
        return f"the {name} adapter runs on {', '.join(runtime.devices)}, not {kind}"
    return None


def _missing(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is None
    except ModuleNotFoundError:  # a dotted name whose parent package is absent
        return True


def optional_missing(variant: Variant) -> str | None:
    """An optional package (nothing installs it) that `variant`'s pass imports and this machine lacks:
    known from the registry, before any process imports torch to find out."""
    absent = [name for name in variant.requires if PACKAGES[name].optional and _missing(PACKAGES[name].modules[0])]
    return not_installed(absent) if absent else None


def not_installed(optional: list[str]) -> str:
    return f"{', '.join(optional)} is not installed (an optional package: pip install {' '.join(optional)})"


def not_for_family(the_pass: Pass, knob_values: Any, family: Family) -> Skip | None:
    """The pass's own question about the export's model family (Pass.not_for: dynamic INT8 for a CNN),
    answered before any process starts."""
    why = the_pass.not_for(knob_values, family)
    return Skip(Kind.NOT_APPLICABLE, why) if why else None


def already_integer(variant: Variant, model: str, source: SourceRecord) -> Skip | None:
    """An integer variant of a source that is INT8 throughout (the export's `full_integer`): its quantization is
    kept by the export (QDQ) and by OpenVINO's reading of the file, so the float variants already run it as INT8;
    quantizing again would only swap its authors' scales for ones calibrated here."""
    if variant.precision not in ("int8", "int4") or not (what := source.export.full_integer):
        return None
    return Skip(
        Kind.NOT_APPLICABLE,
        f"{model} is already {what}: the float variants run its INT8 graph as it is; {variant.name} would "
        "quantize it again with scales calibrated here instead of its own",
    )


def rescued_records(variant: Variant, model: str, params: Params, root: Path) -> dict[str, records.VariantRecord]:
    """The measured records of the variants fallback `variant` rescues (deciding_records). Its build
    stage depends on them (pipeline.stagefile), so they are this run's."""
    paths = {name: layout.details_file(model, name, root) for name in deciding_records(params, variant.name)}
    return {name: records.parse(read_json(path)) for name, path in paths.items() if path.exists()}


def not_needed(model: str, params: Params, rescued: dict[str, records.VariantRecord]) -> Skip | None:
    """A fallback (a variant that `rescues` others: accuracy-controlled INT8) is built only when no
    variant it rescues (`rescued`, their records) was measured here and met every one of the model's
    quality constraints: otherwise its search would spend minutes to make a model of which one that
    passes exists."""
    for name, record in rescued.items():
        if not record.ok or quality_violations(record, params.select.constraints_for(model)):
            continue
        figures = [f"task metric drop {record.accuracy_drop:.4g}"] if record.accuracy_drop is not None else []
        figures += [f"worst-output fidelity {record.worst_output_score:.4f}"] if record.worst_output_score else []
        figures += [f"perplexity {record.ppl_increase_pct:+.3g}%"] if record.ppl_increase_pct is not None else []
        return Skip(
            Kind.NOT_NEEDED,
            f"not needed: {name} meets {model}'s quality constraints ({', '.join(figures) or 'no figure'})",
        )
    return None


def nothing_to_gain(fallback: Pass, knob_values: Any, rescued: dict[str, records.VariantRecord]) -> Skip | None:
    """A needed fallback whose own check (Pass.nothing_to_gain) says, from the measured record of every
    variant it rescues, that its work could not improve on them: skipped before any build."""
    if not rescued or not all(record.ok for record in rescued.values()):
        return None
    reason = fallback.nothing_to_gain(knob_values, rescued)
    return None if reason is None else Skip(Kind.NOT_APPLICABLE, reason)


def why_not_built(
    variant: Variant,
    model: str,
    params: Params,
    the_pass: Pass,
    knob_values: Any,
    source: SourceRecord,
    probe: Probe,
    root: Path = Path("."),
) -> Skip | None:
    """The build stage's question, before any process: the first rule of RULES that rules `variant` out
    for `model` on its configured target (probed as `probe`), or None to build it. `source`: the export's
    record (its model family, whether it is INT8 already); `the_pass`, `knob_values`: the variant's pass and
    its checked knobs."""
    target = target_for(variant.device, params.targets)
    if skip := never_applies(variant, model, params.model(model), target):
        return skip
    assert target is not None  # never_applies rules out a variant without a target
    skip = (
        unavailable(variant, target, probe)
        or not_for_family(the_pass, knob_values, source.family)
        or already_integer(variant, model, source)
    )
    if skip is None and variant.rescues:  # a fallback: is it needed, and could it gain anything?
        rescued = rescued_records(variant, model, params, root)
        skip = not_needed(model, params, rescued) or nothing_to_gain(the_pass, knob_values, rescued)
    return skip


# The stage files' question: which (model, variant) pairs get stages.


def _never(params: Params, model: str, name: str) -> Skip | None:
    variant = registry.get(name, section=params.group_of(name))
    return never_applies(variant, model, params.model(model), target_for(variant.device, params.targets))


def not_applicable(params: Params, model: str) -> dict[str, Skip]:
    """The configured variants that can never apply to `model` (never_applies), with why: they get no
    stages, and the select record, summary and report list them once."""
    return {name: skip for name in params.all_variants if (skip := _never(params, model, name))}


def applicable_models(params: Params, variant: str) -> list[str]:
    """The models (in `models` order) that get `variant`'s build and bench stages."""
    return [model for model in params.models if _never(params, model, variant) is None]


def deciding_records(params: Params, fallback: str) -> list[str]:
    """The variants whose records decide whether `fallback` is needed (not_needed): those it rescues
    that are configured and have a stage for every model `fallback` has one for (its build stage
    depends on their records, and one stage template serves every model)."""
    models = applicable_models(params, fallback)
    return [
        name
        for name in VARIANTS[fallback].rescues
        if name in params.all_variants and set(models) <= set(applicable_models(params, name))
    ]
