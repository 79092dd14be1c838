"""DVC stage (always run): the software and hardware fingerprints, with a probe of each configured
target (pipeline.machine.naming.write_env), then this machine's roofs (pipeline.measure.peaks: measured
once per machine class and kept)."""

import sys
from pathlib import Path
from typing import Any

from pipeline.machine.naming import write_env
from pipeline.measure.peaks import ensure_peaks
from pipeline.stage_runner import run_stage


def env_and_peaks(params: Any, root: Path = Path(".")) -> dict[str, Any]:
    """The fingerprints first (the peaks are keyed by the machine class they record), then the peaks."""
    result = write_env(params, root)
    _, how = ensure_peaks(params.bench.resolved_threads(), root)
    return result | {"reason": f"{result['reason']}; peaks {how}"}


if __name__ == "__main__":
    sys.exit(run_stage(env_and_peaks, []))
