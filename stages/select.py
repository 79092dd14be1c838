"""DVC stage: choose one model's deployment artifact and write deploy/<model>/ (see pipeline.decide.deploy)."""

import sys

from pipeline.decide.deploy import select
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(select, ["model"]))
