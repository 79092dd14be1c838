"""DVC stage `select`: choose one model's deployment artifact and write deploy/<model>/ (pipeline.decide.deploy).

Not stages/select.py: DVC runs `python stages/<file>`, which puts stages/ first on sys.path, where a
select.py would shadow the standard library's `select` module.
"""

import sys

from pipeline.decide.deploy import select_artifact
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(select_artifact, ["model"]))
