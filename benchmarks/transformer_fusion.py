"""Is `onnx_opt` at least as fast as `onnx_fp32` on every transformer of the run? (issue 20, item 2)

For each model of params.yaml's `models` that the export detected as a transformer, `onnx_fp32`
and `onnx_opt` of this project's built artifacts are timed side by side in one fresh process by the
select stage's contest (pipeline.measure.interleaved: alternating blocks, bench threads, machine
lock), and the opt/fp32 ratio is printed with its 95% interval, the exporter the export chose and
the fusions ORT's transformer optimizer made. Writes reports/benchmarks/transformer_fusion.json.
Run it after `dvc repro`, with nothing else on the machine.

    python -m benchmarks.transformer_fusion [MODEL ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pipeline.core import layout
from pipeline.core.config import PARAMS_FILE, load_params
from pipeline.core.files import write_json
from pipeline.machine.fingerprint import fingerprint
from pipeline.measure.contest import measure_contenders

REPO = Path(__file__).resolve().parents[1]
PAIR = ["onnx_fp32", "onnx_opt"]


def transformers(models: list[str]) -> list[str]:
    found = []
    for model in models:
        report = layout.export_report(model, REPO)
        if report.exists() and json.loads(report.read_text()).get("family", {}).get("model_type") == "transformer":
            found.append(model)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*")
    args = parser.parse_args()
    params = load_params(REPO / PARAMS_FILE)
    results = {}
    for model in transformers(args.models or params.models):
        export = json.loads(layout.export_report(model, REPO).read_text())
        fused = (
            json.loads((REPO / "reports/details" / model / "onnx_opt.json").read_text())
            .get("build", {})
            .get("fused_ops")
        )
        race = measure_contenders(model, PAIR, params, REPO)
        latency = race["latency_ms"]
        if race["leader"] == "onnx_fp32":
            r = race["ratio_to_leader"]["onnx_opt"]
            ratio, low, high = r["ratio"], r["low"], r["high"]
        else:  # opt led: invert its lead into opt / fp32
            r = race["ratio_to_leader"]["onnx_fp32"]
            ratio, low, high = 1 / r["ratio"], 1 / r["high"], 1 / r["low"]
        verdict = "slower" if low > 1 + params.select.contest.tie_pct / 100 else "not slower"
        results[model] = {
            "opt_over_fp32": ratio,
            "ci95": [low, high],
            "verdict": verdict,
            "p50_ms": latency,
            "exporter": export.get("exporter"),
            "exporter_why": export.get("exporter_why"),
            "fused_ops": fused,
            "how": race["how"],
        }
        print(
            f"{model:14} onnx_opt / onnx_fp32 = {ratio:.3f} (95% CI {low:.3f}-{high:.3f}, {verdict}); "
            f"p50 {latency['onnx_opt']:.3f} vs {latency['onnx_fp32']:.3f} ms; {export.get('exporter')}; "
            f"fused {fused}",
            flush=True,
        )
    cpu = fingerprint()["cpu"]
    out = REPO / "reports/benchmarks/transformer_fusion.json"
    write_json(out, {"cpu": f"{cpu['model']} ({cpu['cores']} cores)", "results": results})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
