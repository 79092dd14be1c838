"""DVC stage (always run): write the environment fingerprint every build and bench depends on,
with a probe of each configured target (pipeline.target_probe)."""

import sys

from pipeline.fingerprint import write_env
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(write_env, []))
