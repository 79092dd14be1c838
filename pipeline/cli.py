"""`python -m pipeline COMMAND` (or `modelopt COMMAND`): the user-facing commands.

DVC stages (stages/*.py) enter through pipeline.stage_runner instead, which imports nothing else:
a stage then depends only on the modules its own work imports.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pipeline.core.errors import PipelineError, first_line


def _summary(args: argparse.Namespace) -> int:
    if args.output and not args.machines:
        raise PipelineError("summary: --output writes the cross-machine page: use it with --machines")
    if args.machines:
        from pipeline.present.compare import print_comparison

        print_comparison(models=args.model or None, markdown=args.md, output=args.output)
        return 0
    from pipeline.present.summary import print_summary

    print_summary(models=args.model or None, markdown=args.md, wide=args.wide)
    return 0


def _machine(args: argparse.Namespace) -> int:
    from pipeline.machine.naming import BRANCH_PREFIX, current

    here = current()
    print(here["name"])  # alone on stdout, for scripts: git switch -c results/$(python -m pipeline machine)
    print(
        f"from {here['source']}; hardware {here['hardware']}; results branch {BRANCH_PREFIX}{here['name']}",
        file=sys.stderr,
    )
    return 0


def _repro(args: argparse.Namespace) -> int:
    from pipeline.progress import repro_with_progress

    return repro_with_progress(args.dvc_args)


def _stages(args: argparse.Namespace) -> int:
    from pipeline.stagefile import check_or_write, portable_builds

    if args.portable_builds:
        print("\n".join(portable_builds()))
        return 0
    return check_or_write(write=args.write)


def _docs(args: argparse.Namespace) -> int:
    from pipeline.docs import check_or_write

    return check_or_write(write=args.write)


def _env(args: argparse.Namespace) -> int:
    from pipeline.machine.fingerprint import fingerprint

    print(json.dumps(fingerprint(), indent=2))
    return 0


def _check(args: argparse.Namespace) -> int:
    from pipeline.core.config import load_params
    from pipeline.core.errors import ConfigError
    from pipeline.optimize.knobs import check_variant_params
    from pipeline.optimize.variant_lists import check_variant_lists
    from pipeline.prepare.check import check_models
    from pipeline.stagefile import require_current

    params = load_params(args.params)
    check_variant_lists(params, str(args.params))  # the variant lists against the registry: else nothing to check
    problems = []
    try:
        check_variant_params(params, str(args.params))  # each variant's knobs, by its pass's Config
    except ConfigError as error:
        problems.append(str(error))
    problems += check_models(params, args.params.parent)
    try:
        require_current(params, args.params.parent)
    except ConfigError as error:
        problems.append(str(error))
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        return 2
    print(f"{args.params}: ok ({len(params.models)} models, {len(params.all_variants)} variants; their files checked)")
    return 0


def _add(args: argparse.Namespace) -> int:
    from pipeline.prepare.add.command import add_model, describe
    from pipeline.prepare.add.flags import Flags, parse_assignments, parse_dims
    from pipeline.stagefile import check_or_write

    flags = Flags(args.eval, parse_dims(args.dim), args.vocab, args.metric, args.task, args.weights, args.sample,
                  tuple(args.input), parse_assignments("--value", args.value, float),
                  parse_assignments("--batch-axis", args.batch_axis, int),
                  parse_assignments("--output-rows", args.output_rows, int),
                  parse_assignments("--threshold", args.threshold, float),
                  {k: v for k, _, v in (a.partition("=") for a in args.judged_as)}, args.trust_pickle,
                  parse_assignments("--tolerance", args.tolerance, float))  # fmt: skip
    try:  # add_model leaves nothing written whatever failed; a case it did not foresee is still one line
        inferred = add_model(args.name, args.path, Path("."), flags)
    except PipelineError:
        raise
    except Exception as error:
        raise PipelineError(
            f"{args.path}: `add` could not read it ({type(error).__name__}: {first_line(error)})"
        ) from None
    check_or_write(Path("."), write=True)  # its stages: `dvc repro` runs it next
    print(describe(args.name, inferred))
    return 0


def _serve(args: argparse.Namespace) -> int:
    from pipeline.serve.server import serve

    serve(args.deploy, args.host, args.port, args.instances, args.threads, args.max_queue, args.max_body_mb,
          args.grpc_port)  # fmt: skip
    return 0


def _predict(args: argparse.Namespace) -> int:
    from pipeline.serve.predict import run_cli

    run_cli(args.deploy, args.input, args.output, args.threads, args.prompt, args.max_new_tokens, args.allow_nonfinite,
            args.text)  # fmt: skip
    return 0


def _serving(args: argparse.Namespace) -> int:
    from pipeline.core.config import ServingConfig
    from pipeline.serve.repositories.write import write_serving

    timed = {} if args.compare_seconds is None else {"compare_seconds": args.compare_seconds}
    config = ServingConfig(triton=args.triton, ovms=args.ovms, check_versions=not args.no_version_check, **timed)
    report = write_serving(args.deploy, config)
    print(f"{report.model}: {report.folder}")
    for line in report.lines():
        print(f"  {line}")
    return 0


def _gate(args: argparse.Namespace) -> int:
    """The stored verdict; latency re-measured here, side by side, when asked (--remeasure) or when the base revision
    ran on another CPU (unless --no-remeasure: then, or when the base artifacts cannot be had, NOT_COMPARABLE)."""
    from pipeline.ci.gate import NOT_COMPARABLE, PASSED, REGRESSED, print_gate, run_gate
    from pipeline.core.config import load_params

    params = load_params(args.params)
    percentile = args.percentile or params.select.percentile
    run = run_gate(params, args.rev, args.threshold, percentile, args.model or None)
    print_gate(run, args.rev, args.threshold, percentile)
    if run.comparable and not args.remeasure:
        return REGRESSED if run.failed else PASSED
    judge_here = f"python -m pipeline gate --remeasure --rev {args.rev}"
    if not run.comparable and args.no_remeasure:
        print(f"gate: NOT COMPARABLE: {args.rev}'s latency was measured on {run.machines[0]}, this workspace's on "
              f"{run.machines[1]}; `{judge_here}` judges it here, side by side")  # fmt: skip
        return REGRESSED if run.failed else NOT_COMPARABLE
    from pipeline.ci.remeasure import remeasure

    try:
        results, origins = remeasure({v.model: (v.before, v.after) for v in run.verdicts}, args.rev, args.rounds)
    except PipelineError as error:
        if run.comparable:
            raise
        print(f"gate: NOT COMPARABLE: {args.rev} was measured on {run.machines[0]} and its chosen artifacts cannot "
              f"be had here ({error}); `{judge_here}` judges it where the DVC cache or remote holds them")  # fmt: skip
        return REGRESSED if run.failed else NOT_COMPARABLE
    print(f"\nPaired, measured now: {args.rounds} alternating rounds, each in a fresh process (batch-1 p50)")
    paired_failures = []
    for result in results:
        failure = result.failure(args.threshold)
        paired_failures += [failure] if failure else []
        base, now = (", ".join(f"{x:.4g}" for x in xs) for xs in (result.base_ms, result.now_ms))
        verdict = "FAIL" if failure else "ok"
        print(f"{result.model}: {result.base.variant} at {args.rev} ({origins[result.model]}) [{base}] ms vs "
              f"{result.now.variant} now [{now}] ms: {result.change_pct:+.1f}% {verdict}")  # fmt: skip
    # Latency is judged on the paired figures; everything else (quality, nothing feasible) as stored.
    timing = ("latency", "slower artifact")
    stored = [f for v in run.verdicts for f in v.failures if not any(word in f for word in timing)]
    failed = stored + paired_failures
    print(f"gate (paired): {'FAILED' if failed else 'passed'}")
    return REGRESSED if failed else PASSED


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    summary = commands.add_parser("summary", help="print one table per model from this working tree's figures")
    summary.add_argument("model", nargs="*", help="models to show (default: those in params.yaml)")
    summary.add_argument("--machines", action="store_true", help="every machine side by side (results/<name> branches)")
    summary.add_argument("--md", action="store_true", help="Markdown tables instead of terminal tables")
    summary.add_argument(
        "--wide", action="store_true", help="every column and every note in full (default: what fits the terminal)"
    )
    summary.add_argument("--output", type=Path, help="with --machines: write the Markdown page to this file")
    summary.set_defaults(run=_summary)
    commands.add_parser("machine", help="print this machine class's name").set_defaults(run=_machine)
    repro = commands.add_parser("repro", help="dvc repro with one live progress line (extra args go to dvc)")
    repro.add_argument("dvc_args", nargs=argparse.REMAINDER, help="passed to `dvc repro` (e.g. -f, --pull)")
    repro.set_defaults(run=_repro)
    commands.add_parser("env", help="print this machine's environment fingerprint").set_defaults(run=_env)
    for name, run, what in (
        ("stages", _stages, "the pipeline's dvc.yaml files (variants/<variant>/ included)"),
        ("docs", _docs, "the generated tables in docs/ and README"),
    ):
        command = commands.add_parser(name, help=f"check {what} is up to date with the code (--write: regenerate)")
        command.add_argument("--write", action="store_true")
        command.set_defaults(run=run)
    commands.choices["stages"].add_argument(
        "--portable-builds", action="store_true", help="print the DVC targets of the builds machines share"
    )
    check = commands.add_parser("check", help="validate params.yaml and the listed models' files, running nothing")
    check.add_argument("--params", type=Path, default=Path("params.yaml"))
    check.set_defaults(run=_check)
    add = commands.add_parser("add", help="add a model from its file: reads the inputs, writes the catalog entry")
    add.add_argument("name", help="the model's name (letters, digits, '_')")
    add.add_argument(
        "path",
        type=Path,
        help="an .onnx file (external data beside it), a .keras (or Keras 2 .h5) file, a SavedModel folder, a "
        "Hugging Face folder, or a PyTorch or JAX factory as FILE.py:FUNCTION",
    )
    add.add_argument("--eval", type=Path, help=".npz of held-out inputs (with `labels`: a classifier); text models: "
                     ".txt (a text a line) or .jsonl ({text, label})")  # fmt: skip
    add.add_argument("--task", help="Hugging Face folders: feature-extraction, text-classification, "
                     "token-classification, image-classification, text-generation (else config.json's)")  # fmt: skip
    add.add_argument("--dim", action="append", default=[], help="a symbolic axis's value, e.g. seq=128 (repeatable)")
    add.add_argument("--vocab", type=int, help="token ids' vocabulary size, when the file does not tell it")
    add.add_argument("--metric", help="with labelled --eval: accuracy (default), binary_accuracy, f1, cer, or your "
                     "own FILE.py:FUNCTION(outputs, labels) -> float (copied beside the model)")  # fmt: skip
    add.add_argument("--threshold", action="append", default=[], help="an output's decision threshold, e.g. "
                     "scores=0.25 (repeatable; default 0.5)")  # fmt: skip
    add.add_argument("--judged-as", action="append", default=[], help="an output's reading where its values and name "
                     "cannot tell, e.g. classificators=logits, mesh=points, logits=ctc (repeatable)")  # fmt: skip
    add.add_argument("--tolerance", action="append", default=[], help="how far a points output's point may move, "
                     "in its own units, e.g. landmarks=2.0 (default: 1%% of the coordinates' span)")  # fmt: skip
    add.add_argument("--weights", type=Path, help="FILE.py:FUNCTION: its state_dict (.pt) or Flax params (.msgpack)")
    add.add_argument("--sample", type=Path, help="FILE.py:FUNCTION: an .npz of inputs (batch first) giving their "
                     "names, dtypes and shapes")  # fmt: skip
    add.add_argument("--input", action="append", default=[], help="FILE.py:FUNCTION: NAME=D1,D2[:DTYPE], the axes "
                     "after the batch (repeatable; a symbol takes --dim)")  # fmt: skip
    add.add_argument("--value", action="append", default=[], help="a scalar input's value, passed on every call, "
                     "e.g. sr=16000 (repeatable; else the eval data's)")  # fmt: skip
    add.add_argument("--batch-axis", action="append", default=[], help="an input whose batch axis is not the "
                     "first, e.g. state=1 (repeatable; else read off the graph or the eval data)")  # fmt: skip
    add.add_argument("--output-rows", action="append", default=[], help="ONNX files: an output whose rows (batch) "
                     "axis the file does not tell, e.g. 387=1 (repeatable; else read off the graph, its declared "
                     "shape or a run)")  # fmt: skip
    add.add_argument("--trust-pickle", action="store_true", help="a scikit-learn .joblib/.pkl file: load it (a "
                     "pickle runs code from the file: only one whose origin you trust)")  # fmt: skip
    add.set_defaults(run=_add)
    predict = commands.add_parser("predict", help="run a deployment artifact (deploy/<model>) on inputs")
    predict.add_argument("deploy", type=Path, help="the deploy/<model> folder written by the select stage")
    predict.add_argument(
        "input", type=Path, nargs="?", help=".npy (single-input models) or .npz (arrays named like the inputs)"
    )
    predict.add_argument(
        "--text", action="append", help="Hugging Face text models (`add` of a folder): a text to run; repeat for more"
    )
    predict.add_argument("--prompt", help="text-generation models: the text to continue (greedy)")
    predict.add_argument("--max-new-tokens", type=int, default=32, help="text-generation models (default 32)")
    predict.add_argument("--output", type=Path, help="save outputs to .npy (one output) or .npz instead of printing")
    predict.add_argument("--threads", type=int, help="intra-op threads (default: all cores)")
    predict.add_argument(
        "--allow-nonfinite", action="store_true", help="pass NaN and Inf in float inputs (refused by default)"
    )
    predict.set_defaults(run=_predict)
    served = commands.add_parser(
        "serve", help="serve a deploy/<model> folder over the Open Inference Protocol (KServe v2 REST and gRPC)"
    )
    served.add_argument("deploy", type=Path, help="the deploy/<model> folder written by the select stage")
    served.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    served.add_argument("--grpc-port", type=int, default=8001, help="the gRPC service's TCP port (default 8001, "
                        "Triton's; 0: no gRPC)")  # fmt: skip
    served.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1; 0.0.0.0 in a container)")
    served.add_argument("--instances", type=int, help="model instances (default: the benchmark's concurrent requests)")
    served.add_argument("--threads", type=int, help="threads in all (default: the benchmark's concurrent threads)")
    served.add_argument("--max-queue", type=int, help="requests that may wait for an instance, REST and gRPC "
                        "alike; more get 503 (gRPC RESOURCE_EXHAUSTED) (default: 4 per instance)")  # fmt: skip
    served.add_argument("--max-body-mb", type=float, default=64, help="largest request body, compressed or not, "
                        "and gRPC message, in MiB; larger gets 413 (gRPC RESOURCE_EXHAUSTED) (default 64)")  # fmt: skip
    served.set_defaults(run=_serve)
    serving = commands.add_parser(
        "serving", help="write and check Triton, OVMS and KServe repositories (deploy/<model>/serving/)"
    )
    serving.add_argument("deploy", type=Path, help="the deploy/<model> folder written by the select stage")
    serving.add_argument("--triton", help="the Triton release (yy.mm) to write for (default: the newest known)")
    serving.add_argument("--ovms", help="the OVMS release (yyyy.n) to write for (default: the newest known)")
    serving.add_argument(
        "--no-version-check", action="store_true", help="write without loading the artifact in each release's runtime"
    )
    serving.add_argument(
        "--compare-seconds", type=float,
        help="seconds timing the artifact in each release's runtime beside this pipeline's (default 3; 0: not timed)",
    )  # fmt: skip
    serving.set_defaults(run=_serving)
    gate = commands.add_parser(
        "gate", help="fail (exit 1) when a chosen artifact regressed against a git revision (for CI); 3: not comparable"
    )
    gate.add_argument("model", nargs="*", help="models to check (default: those in params.yaml)")
    gate.add_argument("--rev", default="HEAD~1", help="git revision to compare with (default: HEAD~1)")
    gate.add_argument("--threshold", type=float, default=10.0, help="allowed latency regression, percent (default 10)")
    gate.add_argument("--percentile", choices=["p50", "p90", "p99"], help="default: select.percentile in params.yaml")
    gate.add_argument("--params", type=Path, default=Path("params.yaml"))
    gate.add_argument("--remeasure", action="store_true", help="judge latency on A/B figures measured now (the "
                      "default when the base revision ran on another CPU)")  # fmt: skip
    gate.add_argument("--no-remeasure", action="store_true", help="never re-measure: a base revision from another "
                      "CPU exits 3 (not comparable) with the command that would judge it")  # fmt: skip
    gate.add_argument("--rounds", type=int, default=4, help="alternating rounds for --remeasure (default 4)")
    gate.set_defaults(run=_gate)
    args, unknown = parser.parse_known_args(argv)
    if args.command == "repro":  # dvc's options: argparse's REMAINDER refuses one first (`repro --pull`)
        args.dvc_args = [*unknown, *args.dvc_args]
    elif unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return args.run(args)
    except PipelineError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
