"""DVC stage (always run): write one machine's fingerprint, which its builds and benchmarks depend
on, with a probe of each configured target (pipeline.machines.write_env)."""

import sys

from pipeline.machines import write_env
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(write_env, ["machine"]))
