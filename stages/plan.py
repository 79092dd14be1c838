"""DVC stage: each variant's params and code hash as its own file (see pipeline.optimize.plan), once
the stage files are checked to follow params.yaml (pipeline.stagefile.require_current): the first
stage `dvc repro` runs, so a model added without its stages stops here with the command to run."""

import sys

from pipeline.optimize.plan import write_plan
from pipeline.stage_runner import run_stage
from pipeline.stagefile import require_current


def plan(params):
    """Check the stage files, then write the plan."""
    require_current(params)
    return write_plan(params)


if __name__ == "__main__":
    sys.exit(run_stage(plan, []))
