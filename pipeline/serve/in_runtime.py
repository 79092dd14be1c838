"""Run a model file with whatever runtime version this interpreter has: the script an engine release's
runtime environment (pipeline.serve.runtime_env) runs, so it imports numpy and the runtime only.

    python in_runtime.py run onnxruntime|openvino MODEL INPUTS.npz OUTPUTS.npz [PROPERTIES_JSON]
    python in_runtime.py time onnxruntime|openvino MODEL INPUTS.npz PROPERTIES_JSON THREADS

`run` writes the outputs by name and prints one JSON line: the runtime's version, and the error's first
line when the file cannot be loaded (exit 0: a refusal is an answer, not a crash of this script).

`time` loads the file on THREADS threads, prints {"version": ...}, then answers each line of its input:
`block SECONDS` runs INPUTS (two untimed calls, then calls until SECONDS have passed, one at least) and
prints {"ms": [each call's milliseconds]}. The caller alternates two such processes, one per runtime
version (pipeline.serve.side_by_side).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

WARM_CALLS = 2


def load(runtime: str, model: str, properties: dict, threads: int = 0) -> Callable[[dict], dict]:
    """A call from named inputs to named outputs; raises what the runtime raises when it cannot load
    the file. `threads` 0: the runtime's default."""
    if runtime == "onnxruntime":
        import onnxruntime as ort

        options = ort.SessionOptions()
        if extensions := importlib.util.find_spec("onnxruntime_extensions"):  # its text operators, where installed
            folder = Path(extensions.origin).parent
            found = (folder / f"_extensions_pydll{suffix}" for suffix in importlib.machinery.EXTENSION_SUFFIXES)
            library = next(path for path in found if path.is_file())
            options.register_custom_ops_library(str(library))
        if threads:
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        return lambda feeds: dict(zip(names, session.run(names, feeds), strict=True))
    import openvino as ov

    threads_property = {"INFERENCE_NUM_THREADS": threads} if threads else {}
    compiled = ov.Core().compile_model(model, "CPU", properties | threads_property)
    request = compiled.create_infer_request()

    def call(feeds: dict) -> dict:
        result = request.infer(feeds)
        # every name of each port: a port may carry a graph output's name beside its producer's
        return {name: result[port] for port in compiled.outputs for name in port.get_names()}

    return call


def version_of(runtime: str) -> str:
    """The runtime's release (OpenVINO's own string carries its build after a '-')."""
    if runtime == "onnxruntime":
        import onnxruntime as ort

        return ort.__version__
    import openvino as ov

    return ov.get_version().split("-")[0]


def first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]


def read_inputs(path: str) -> dict:
    import numpy as np

    with np.load(path) as data:
        return {name: data[name] for name in data.files}


def run(runtime: str, model: str, inputs_path: str, outputs_path: str, properties: dict) -> dict[str, Any]:
    import numpy as np

    try:
        call = load(runtime, model, properties)
    except Exception as error:
        return {"version": version_of(runtime), "error": first_line(error)}
    np.savez(outputs_path, **call(read_inputs(inputs_path)))
    return {"version": version_of(runtime)}


def serve_blocks(runtime: str, model: str, inputs_path: str, properties: dict, threads: int) -> None:
    """Answer `block SECONDS` lines from stdin until it closes (see the module's docstring)."""
    call = load(runtime, model, properties, threads)
    feeds = read_inputs(inputs_path)
    print(json.dumps({"version": version_of(runtime)}), flush=True)
    for line in sys.stdin:
        seconds = float(line.removeprefix("block "))
        for _ in range(WARM_CALLS):
            call(feeds)
        times, end = [], time.perf_counter() + seconds
        while not times or time.perf_counter() < end:
            start = time.perf_counter()
            call(feeds)
            times.append((time.perf_counter() - start) * 1e3)
        print(json.dumps({"ms": times}), flush=True)


if __name__ == "__main__":
    mode, runtime, model, inputs = sys.argv[1:5]
    if mode == "time":
        serve_blocks(runtime, model, inputs, json.loads(sys.argv[5]), int(sys.argv[6]))
    else:
        properties = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
        print(json.dumps(run(runtime, model, inputs, sys.argv[5], properties)))
    sys.stdout.flush()
    os._exit(0)  # answered: no native teardown (OpenVINO's and ONNX Runtime's destructors) while the caller waits
