"""The registry (pipeline.core.registry) is data that the rest reads: every package it names is
installed by pyproject.toml and recorded by the fingerprint, every pass and runtime it names by
module path exists in its layer and imports, and the modules that import by string stay in the
layering that `lint-imports` checks for ordinary imports."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel

from pipeline.core import registry
from pipeline.core.records.env import Probe
from pipeline.core.registry import PACKAGES, RUNTIMES, SOURCES, VARIANTS
from pipeline.machine import fingerprint
from pipeline.optimize.knobs import pass_class
from pipeline.optimize.passes.base import Pass
from tests.conftest import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def normalized(requirement: str) -> str:
    """A requirement's distribution name, PEP 503-normalized ('onnxruntime-genai==0.18.*' -> onnxruntime-genai)."""
    name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert name, requirement
    return re.sub(r"[-_.]+", "-", name.group()).lower()


def listed_in_pyproject() -> dict[str | None, set[str]]:
    """{None: [project] dependencies, extra: its optional dependencies}, as normalized names."""
    project = PYPROJECT["project"]
    listed: dict[str | None, set[str]] = {None: {normalized(r) for r in project["dependencies"]}}
    for extra, requirements in project.get("optional-dependencies", {}).items():
        listed[extra] = {normalized(r) for r in requirements}
    return listed


def pyproject_problem(package: str) -> str | None:
    """Why pyproject.toml does not install `package` the way the registry says, or None."""
    entry, listed = PACKAGES[package], listed_in_pyproject()
    where = "dependencies" if entry.extra is None else f"optional-dependencies.{entry.extra}"
    if entry.optional:
        return None
    if entry.extra not in listed:
        return f"{package}: pyproject.toml has no [{entry.extra}] extra"
    wanted = entry.via or package
    if normalized(wanted) not in listed[entry.extra]:
        return f"{package}: {wanted} is not in pyproject.toml's {where}" + (
            f" (it brings {package})" if entry.via else ""
        )
    return None


def test_every_package_in_the_table_is_installed_by_pyproject():
    problems = [problem for package in PACKAGES if (problem := pyproject_problem(package))]
    assert not problems, problems


def used_packages() -> dict[str, set[str]]:
    """{package: the registry entries that import it}: runtimes, variants (pass and runtime), source kinds."""
    users: dict[str, set[str]] = {}
    for name, runtime in RUNTIMES.items():
        for package in runtime.requires:
            users.setdefault(package, set()).add(f"runtime {name}")
    for name, variant in VARIANTS.items():
        for package in variant.distributions:
            users.setdefault(package, set()).add(f"variant {name}")
    for kind, source in SOURCES.items():
        for package in source.requires:
            users.setdefault(package, set()).add(f"source {kind}")
    return users


def test_every_package_a_runtime_variant_or_source_imports_is_fingerprinted_and_installed():
    recorded = set(fingerprint.PACKAGES) | set(fingerprint.GPU_PACKAGES)
    for package, users in used_packages().items():
        assert package in recorded, f"{package} ({sorted(users)}) is not in the fingerprint"
        assert pyproject_problem(package) is None, pyproject_problem(package)
        if PACKAGES[package].extra is None:  # what a portable build may import is in software.json
            assert package in fingerprint.software()["packages"], package
    assert {"onnxruntime-genai", "openvino-genai"} <= set(used_packages())
    assert set(RUNTIMES["onnxruntime-genai"].requires) <= set(fingerprint.PACKAGES)


def test_a_package_missing_from_pyproject_is_named(monkeypatch):
    monkeypatch.setitem(PACKAGES, "imaginary-runtime", registry.Package(("imaginary_runtime",)))
    assert pyproject_problem("imaginary-runtime") == (
        "imaginary-runtime: imaginary-runtime is not in pyproject.toml's dependencies"
    )
    monkeypatch.setitem(PACKAGES, "imaginary-gpu", registry.Package(("imaginary_gpu",), extra="gpu"))
    assert "optional-dependencies.gpu" in pyproject_problem("imaginary-gpu")


def test_a_missing_optional_package_skips_its_variant_before_any_process(monkeypatch):
    """torchax (torch_xla's converter) is installed by no extra: the registry says it is absent from
    find_spec, so the build stage records the skip without a process that imports torch to find out."""
    from pipeline.core.outcome import Skip
    from pipeline.core.records import Kind
    from pipeline.optimize import applicability

    monkeypatch.setattr(applicability, "_missing", lambda module: module == "torchax")
    skip = applicability.unavailable(VARIANTS["torch_xla"], "cpu", Probe(available=True))
    assert skip == Skip(Kind.UNAVAILABLE, "torchax is not installed (an optional package: pip install torchax)")
    assert applicability.unavailable(VARIANTS["torch_eager"], "cpu", Probe(available=True)) is None
    monkeypatch.setattr(applicability, "_missing", lambda module: False)
    assert applicability.optional_missing(VARIANTS["torch_xla"]) is None


@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_variants_pass_imports_and_holds_its_knobs(name):
    variant = VARIANTS[name]
    assert variant.pass_module.startswith("pipeline.optimize.passes.")
    found = pass_class(name)
    assert issubclass(found, Pass) and issubclass(found.Config, BaseModel)
    assert found.Config.model_config.get("extra") == "forbid", "a misspelt knob must be an error"
    assert variant.runtime in RUNTIMES and variant.device in RUNTIMES[variant.runtime].devices


def defined_names(module: str) -> set[str]:
    """Top-level functions and imported names of a module, read from its file (no import)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, f"{module} does not exist"
    tree = ast.parse(Path(spec.origin).read_text())
    names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    names |= {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom) for a in node.names}
    return names


def test_every_runtime_module_exists_in_its_layer_and_the_cpu_ones_import():
    """GPU-only adapters (tensorrt) import their framework at module level: where it is not installed
    their file must exist and define the adapter's functions; the others are imported, in a child
    process (TensorFlow, JAX and torch together)."""
    cpu = []
    for name, runtime in RUNTIMES.items():
        assert runtime.module.startswith("pipeline.runtimes."), name
        names = defined_names(runtime.module)
        assert "load" in names, f"{runtime.module} has no load()"
        if set(runtime.devices) - {"cpu"}:
            assert "unavailable_on" in names, f"{runtime.module}: a GPU adapter says why it cannot run there"
        if "cpu" in runtime.devices:
            cpu.append(runtime.module)
    code = (
        "import importlib, json, sys; "
        f"found = {{m: callable(getattr(importlib.import_module(m), 'load', None)) for m in {cpu!r}}}; "
        "print(json.dumps(found))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == dict.fromkeys(cpu, True)


def test_every_source_kind_has_its_loader_and_baseline():
    for kind, source in SOURCES.items():
        assert VARIANTS[source.baseline].sources is None or kind in VARIANTS[source.baseline].sources, kind
        if source.loader:
            assert source.loader.startswith("pipeline.prepare.sources.") and "load" in defined_names(source.loader)


def test_the_declared_links_between_variants_hold():
    assert VARIANTS["openvino_int8_acc"].rescues == ("openvino_int8", "openvino_int8_dynamic")
    for variant in VARIANTS.values():
        assert variant.generates == (variant.sources == frozenset({"transformers"})), variant.name
        for other in (variant.should_beat, *variant.rescues):
            assert other is None or (VARIANTS[other].device, VARIANTS[other].tasks) == (variant.device, variant.tasks)


# Modules that import by string, and what they import: the registry's module paths (passes,
# runtimes, source loaders), a child process's entry (pipeline.core.isolate runs the function its
# caller names: each `call("module:function")` is checked below), the user's model code.
STRING_IMPORTERS = {
    "pipeline.optimize.knobs": "pipeline.optimize.passes",
    "pipeline.optimize.applicability": "pipeline.runtimes",  # a runtime adapter's unavailable_on
    "pipeline.runtimes": "pipeline.runtimes",
    "pipeline.measure.loading": "pipeline.runtimes",
    "pipeline.prepare.sources": "pipeline.prepare.sources",
    "pipeline.prepare.check": "pipeline.prepare.sources",  # a source kind's check_file (Source.checks_file)
    "pipeline.core.isolate": None,
    "pipeline.core.model_code": "models",
}


def layers() -> list[list[str]]:
    contract = next(c for c in PYPROJECT["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    return [[name.strip() for name in layer.split("|")] for layer in contract["layers"]]


def layer_of(module: str) -> int:
    """The index of `module`'s layer in the layers contract, 0 the top (pipeline.cli)."""
    for index, names in enumerate(layers()):
        if any(module == name or module.startswith(name + ".") for name in names):
            return index
    raise AssertionError(f"{module} is in no layer of pyproject.toml's layers contract")


def modules() -> dict[str, ast.Module]:
    found = {}
    for path in sorted((REPO / "pipeline").rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = ast.parse(path.read_text(), str(path))
    return found


def string_imports(tree: ast.Module) -> tuple[bool, list[str]]:
    """Whether a module calls import_module, and the modules it names in `call("module:function")`."""
    dynamic, named = False, []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        dynamic |= function in ("import_module", "__import__")
        if function == "call" and node.args:
            first = node.args[0]
            text = first.value if isinstance(first, ast.Constant) else None
            if isinstance(first, ast.JoinedStr) and isinstance(first.values[0], ast.Constant):
                text = str(first.values[0].value)  # f"pipeline.measure.{...}:measure": its fixed part
            if isinstance(text, str) and text.startswith("pipeline."):
                named.append(re.split(r"[:{]", text)[0].rstrip("."))
    return dynamic, named


def test_string_imports_follow_the_layers():
    """lint-imports sees `import` statements only: a module imported by name (importlib, or a child
    process's entry) must lie in the importer's layer or below, as an ordinary import would."""
    importers, calls = set(), 0
    for name, tree in modules().items():
        dynamic, named = string_imports(tree)
        if dynamic:
            importers.add(name)
        for target in named:
            calls += 1
            assert layer_of(name) <= layer_of(target), f"{name} runs {target} by name: a layer above it"
    assert importers == set(STRING_IMPORTERS), "a new importer by string: add it to STRING_IMPORTERS, in its layer"
    assert calls >= 4  # build, export, probe, bench: the walk sees the calls
    for importer, target in STRING_IMPORTERS.items():
        if target and target.startswith("pipeline."):
            assert layer_of(importer) <= layer_of(target), (importer, target)
    assert not {i for i in importers if i.startswith("pipeline.core.")} - {
        "pipeline.core.isolate",
        "pipeline.core.model_code",
    }
    prefixes = {"pipeline.optimize.passes": [v.pass_module for v in VARIANTS.values()],
                "pipeline.runtimes": [r.module for r in RUNTIMES.values()],
                "pipeline.prepare.sources": [s.loader for s in SOURCES.values() if s.loader]}  # fmt: skip
    for prefix, named in prefixes.items():
        assert all(m.startswith(prefix + ".") for m in named), prefix


def test_the_registry_imports_only_the_bottom_of_core():
    """No import circle: core.config reads the registry, the registry reads nothing of the pipeline
    but errors, paths, the outcome words and the rescues table, which imports nothing of it
    (type-checking imports included)."""
    imported = {
        node.module
        for node in ast.walk(modules()["pipeline.core.registry"])
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pipeline")
    }
    assert imported <= {"pipeline.core.errors", "pipeline.core.layout", "pipeline.core.rescues"}, imported
    rescues = modules()["pipeline.core.rescues"]
    assert not [
        n for n in ast.walk(rescues) if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("pipeline")
    ]


def test_an_onnx_ml_model_gets_stages_only_for_the_variants_that_run_its_operators():
    from types import SimpleNamespace

    forest = SimpleNamespace(source="onnx", skip=[], generates=False, onnx_ml=True, inputs={})
    from pipeline.optimize.applicability import never_applies

    applies = [name for name, v in VARIANTS.items() if not never_applies(v, "forest", forest, v.device)]
    assert applies == ["onnx_fp32", "onnx_opt", "onnx_cuda_fp32"]
    reason = never_applies(VARIANTS["openvino_int8"], "forest", forest, "cpu").reason
    assert reason == "forest uses ONNX-ML operators (ai.onnx.ml), which openvino cannot read"


def test_a_string_model_gets_no_stage_from_a_runtime_that_cannot_feed_strings():
    """A text graph of standard operators (StringNormalizer, TfIdfVectorizer, MatMul; no ONNX-ML): ONNX Runtime's
    variants run it, OpenVINO's would fail in its converter (and TensorRT's engines take no strings): skipped with
    the reason instead."""
    from types import SimpleNamespace

    from pipeline.optimize.applicability import never_applies

    inputs = {"text": SimpleNamespace(dtype="str"), "n": SimpleNamespace(dtype="int64")}
    text = SimpleNamespace(source="onnx", skip=[], generates=False, onnx_ml=False, inputs=inputs)
    applies = {name for name, v in VARIANTS.items() if not never_applies(v, "reviews", text, v.device)}
    assert applies == {name for name, v in VARIANTS.items() if v.runtime == "onnxruntime" and v.sources is None}
    reason = never_applies(VARIANTS["openvino_fp32"], "reviews", text, "cpu").reason
    assert reason.startswith("reviews takes strings (text: dtype str), which openvino cannot feed")
    numbers = SimpleNamespace(**{**vars(text), "inputs": {"n": SimpleNamespace(dtype="int64")}})
    assert never_applies(VARIANTS["openvino_fp32"], "reviews", numbers, "cpu") is None


def test_the_schemas_source_kinds_are_the_registrys():
    """pipeline.core.config writes the source kinds out (the schema imports no table, so an edit to the
    registry retrains nothing): they must stay the registry's SOURCES."""
    from typing import get_args

    from pipeline.core.config import SourceKind

    assert set(get_args(SourceKind)) == set(registry.SOURCES)


def branches_on(words: set[str], subjects: set[str], skip: Callable[[str], bool]) -> list[str]:
    """Where a module (but those `skip` names) compares one of `subjects` (an attribute or a variable of that name)
    with one of `words`, alone or in a tuple, set or list: `module:line` each."""
    found = []
    for name, tree in modules().items():
        if skip(name):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            subject = any(getattr(s, "attr", getattr(s, "id", None)) in subjects for s in sides)
            named = {s.value for s in sides if isinstance(s, ast.Constant)}
            named |= {e.value for s in sides if isinstance(s, ast.Tuple | ast.Set | ast.List) for e in s.elts
                      if isinstance(e, ast.Constant)}  # fmt: skip
            if subject and named & words:
                found.append(f"{name}:{node.lineno}")
    return found


def test_no_module_outside_a_kinds_own_branches_on_a_source_kinds_name():
    """A source kind is its loader, its inspector and its registry rows (docs/development.md, "Adding a source
    kind"): no other module compares a model's kind with a kind's name. The schema says what each kind's entry
    must hold through its own tables (FILE_SOURCES, FACTORY_SOURCES, ...), never `source == "onnx"`."""
    own = {s.loader for s in SOURCES.values() if s.loader} | {"pipeline.core.registry"}
    found = branches_on(set(SOURCES), {"source"}, lambda m: m in own or m.startswith("pipeline.prepare.add.inspect"))
    assert not found, f"branches on a source kind's name: {found}"


def test_no_module_but_the_readings_branches_on_a_readings_name():
    """An output's reading is one type per kind (pipeline.core.readings): what it decides, how it scores and its
    verdict are the type's own, so no other module compares an output's kind (`output_kind`) with a reading's name.
    (An input's `kind`, token ids or values, is another word.)"""
    from pipeline.core.readings import READINGS

    found = branches_on(set(READINGS), {"output_kind", "reading"}, lambda m: m == "pipeline.core.readings")
    assert not found, f"branches on a reading's name: {found}"
