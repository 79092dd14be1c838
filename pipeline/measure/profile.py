"""Where the time goes: an operator-level profile per variant, from each runtime's own profiler.

It runs after every timed figure, on a separately profiled instance (ONNX Runtime's
enable_profiling, OpenVINO's PERF_COUNT, torch.profiler), so profiling overhead never enters a
latency. Written to reports/profile/<model>/<variant>.json: the top operator types by time, with
their share, executions, total time and (OpenVINO) the kernel that ran.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from pipeline.core.data import Arrays
from pipeline.core.errors import first_line
from pipeline.runtimes.base import Session

TOP = 10


def op_profile(session: Session, inputs: Arrays, calls: int) -> dict[str, Any]:
    """The top operator types over `calls` profiled runs of `inputs`, or why there is no profile."""
    try:
        times = session.op_times(inputs, calls)
    except NotImplementedError as error:
        return {"reason": str(error)}
    except Exception as error:
        return {"reason": f"the profiler failed: {type(error).__name__}: {first_line(error)}"}
    executions: Counter[str] = Counter()
    total_ms: defaultdict[str, float] = defaultdict(float)
    kernels: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for op in times:
        executions[op.op_type] += 1
        total_ms[op.op_type] += op.ms
        kernels[op.op_type][op.kernel] += op.ms
    profiled = sum(total_ms.values())
    if not profiled:
        return {"reason": "the profiler reported no operator time"}
    ranked = sorted(total_ms, key=total_ms.__getitem__, reverse=True)[:TOP]
    return {
        "calls": calls,
        "profiled_ms_per_call": profiled / calls,
        "top": {
            op: {
                "share_pct": 100 * total_ms[op] / profiled,
                "executions": executions[op],
                "total_ms": total_ms[op],
                **({"kernel": kernels[op].most_common(1)[0][0]} if kernels[op].most_common(1)[0][0] else {}),
            }
            for op in ranked
        },
    }
