"""DVC stage: choose one model's deployment artifact and write deploy/<model>/ (see pipeline.deploy)."""

import sys

from pipeline.deploy import select_model
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(select_model, ["machine", "model"]))
