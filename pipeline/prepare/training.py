"""The train stage for the embedded zoo: models/<name>/train.py writes models/<name>/trained/.

A zoo model's training script has one function, `train(settings, out_dir) -> metrics`, and writes
the same files a user would bring: weights and .npz splits. Its metrics go to reports/train/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.core.config import PARAMS_FILE, Params
from pipeline.core.errors import ConfigError
from pipeline.core.files import atomic_dir, write_json
from pipeline.core.layout import REPORTS, model_dir
from pipeline.core.model_code import import_object

TRAINED = "trained"


def train_model(name: str, params: Params, root: Path = Path(".")) -> dict[str, Any]:
    if name not in params.train:
        raise ConfigError(f"{PARAMS_FILE}: train.{name}: no training settings for this model")
    train = import_object(f"models.{name}.train:train", root, f"train.{name}")
    with atomic_dir(model_dir(name, root) / TRAINED) as tmp:
        metrics = train(dict(params.train[name]), tmp)
    write_json(root / REPORTS / "train" / f"{name}.json", metrics)
    return metrics
