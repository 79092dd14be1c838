"""Run a model file with whatever runtime version this interpreter has: the script an engine release's
runtime environment (pipeline.serve.runtime_env) runs, so it imports numpy and the runtime only.

    python in_runtime.py onnxruntime|openvino MODEL INPUTS.npz OUTPUTS.npz [PROPERTIES_JSON]

Writes the outputs by name and prints one JSON line: the runtime's version, and the error's first line
when the file cannot be loaded (exit 0: a refusal is an answer, not a crash of this script).
"""

from __future__ import annotations

import json
import sys


def run(runtime: str, model: str, inputs_path: str, outputs_path: str, properties: dict) -> dict:
    import numpy as np

    with np.load(inputs_path) as data:
        inputs = {name: data[name] for name in data.files}
    if runtime == "onnxruntime":
        import onnxruntime as ort

        answer = {"version": ort.__version__}
        try:
            session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        except Exception as error:
            return answer | {"error": str(error).strip().splitlines()[0][:300]}
        names = [o.name for o in session.get_outputs()]
        outputs = dict(zip(names, session.run(names, inputs), strict=True))
    else:
        import openvino as ov

        answer = {"version": ov.get_version()}
        try:
            compiled = ov.Core().compile_model(model, "CPU", properties)
        except Exception as error:
            return answer | {"error": str(error).strip().splitlines()[0][:300]}
        result = compiled(inputs)
        # every name of each port: a port may carry a graph output's name beside its producer's
        outputs = {name: result[port] for port in compiled.outputs for name in port.get_names()}
    np.savez(outputs_path, **outputs)
    return answer


if __name__ == "__main__":
    runtime, model, inputs, outputs = sys.argv[1:5]
    properties = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    print(json.dumps(run(runtime, model, inputs, outputs, properties)))
