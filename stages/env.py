"""DVC stage (always run): the software and hardware fingerprints, with a probe of each configured
target (pipeline.machine.naming.write_env)."""

import sys

from pipeline.machine.naming import write_env
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(write_env, []))
