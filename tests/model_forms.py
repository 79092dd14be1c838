"""Models in the forms they ship in that are no ONNX graph, written by the libraries that write them, for
the `add` tests: TFLite files from TensorFlow's converter, a float one at a fixed batch of 1 with
MediaPipe's kind of outputs (scores [1, anchors, 1], points [1, 1, 1, 3 * landmarks]), and a full-integer
one (int8 inputs and outputs, each with its scale and zero point) with an open batch; scikit-learn models
saved with joblib: a text pipeline whose input is strings, and a numeric one."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _keras_cnn(batch: int | None, mediapipe_outputs: bool) -> object:
    import keras

    keras.utils.set_random_seed(0)
    image = keras.Input((16, 16, 3), batch_size=batch, name="image")
    x = keras.layers.Conv2D(8, 3, activation="relu")(image)
    x = keras.layers.GlobalAveragePooling2D()(x)
    if not mediapipe_outputs:
        return keras.Model(image, keras.layers.Dense(4, activation="softmax", name="probs")(x))
    scores = keras.layers.Reshape((8, 1), name="scores")(keras.layers.Dense(8)(x))
    points = keras.layers.Reshape((1, 1, 12), name="points")(keras.layers.Dense(12)(x))
    return keras.Model(image, [scores, points])


def write_tflite(folder: Path, full_integer: bool = False) -> Path:
    """folder/model.tflite: float (batch fixed to 1, two outputs) or full-integer (int8 in and out, batch open),
    converted by tf.lite.TFLiteConverter from a seeded Keras CNN on 16x16x3 images."""
    import tensorflow as tf

    model = _keras_cnn(None if full_integer else 1, mediapipe_outputs=not full_integer)
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if full_integer:
        rng = np.random.default_rng(0)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([rng.random((1, 16, 16, 3), dtype=np.float32)] for _ in range(16))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = converter.inference_output_type = tf.int8
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.tflite"
    path.write_bytes(converter.convert())
    return path


REVIEWS = (["a fine film with a warm story", "the acting was superb and moving", "a delight from start to end",
            "great music and a clever plot", "i loved every minute of it"],
           ["a dull film with a thin story", "the acting was wooden and flat", "a bore from start to end",
            "awful music and a silly plot", "i hated every minute of it"])  # fmt: skip


def reviews(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`n` short reviews [n, 1] (strings) and their labels (1: positive), mixed from REVIEWS' phrases."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    texts = [" and ".join(rng.choice(REVIEWS[1 - label], 2, replace=False)) for label in labels]
    return np.array(texts, dtype=str)[:, None], labels


def write_text_pipeline(folder: Path) -> tuple[Path, Path]:
    """folder/reviews.joblib: a scikit-learn Pipeline (TfidfVectorizer + LogisticRegression) fitted on reviews,
    saved with joblib as such models ship; folder/reviews.npz: held-out reviews `text` [64, 1] and labels."""
    import joblib
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    texts, labels = reviews(200, seed=0)
    model = make_pipeline(TfidfVectorizer(), LogisticRegression()).fit(texts[:, 0], labels)
    folder.mkdir(parents=True, exist_ok=True)
    joblib.dump(model, folder / "reviews.joblib")
    held_out, held_labels = reviews(64, seed=1)
    np.savez(folder / "reviews.npz", text=held_out, labels=held_labels)
    return folder / "reviews.joblib", folder / "reviews.npz"


def write_numeric_estimator(folder: Path) -> tuple[Path, Path]:
    """folder/iris.joblib: StandardScaler + LogisticRegression on iris (shipped with scikit-learn), saved with
    joblib; folder/iris.npz: the held-out third of the flowers `X` [50, 4] float64 and their labels."""
    import joblib
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = load_iris(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(x))
    train, held = order[:100], order[100:]
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(x[train], y[train])
    folder.mkdir(parents=True, exist_ok=True)
    joblib.dump(model, folder / "iris.joblib")
    np.savez(folder / "iris.npz", X=x[held], labels=y[held])
    return folder / "iris.joblib", folder / "iris.npz"


TREE_FILES = {"xgboost": "json", "lightgbm": "txt", "catboost": "cbm"}  # each library's own file, by its suffix


def write_boosted(folder: Path, library: str, form: str, task: str = "binary") -> tuple[Path, Path]:
    """A small gradient-boosted ensemble (seeded, a few shallow trees) as its users ship it: `form` "file" is the
    library's own file (XGBoost JSON, LightGBM text, CatBoost .cbm), "pickle" its scikit-learn-API estimator through
    joblib.
    `task` binary: scikit-learn's breast-cancer rows (30 features); classes: its digits (64 features, 10
    classes); values: a regression on the diabetes rows (10 features); ranking: a learning-to-rank model on them
    (queries of 10 rows, the target binned into 5 grades). folder/<library>_<task>.npz holds the held-out third as
    float32 `X` and, for the classifiers, their `labels`."""
    import joblib
    from sklearn import datasets

    x, y = {"binary": datasets.load_breast_cancer, "classes": datasets.load_digits,
            "values": datasets.load_diabetes, "ranking": datasets.load_diabetes}[task](return_X_y=True)  # fmt: skip
    x = x.astype(np.float32)
    order = np.random.default_rng(0).permutation(len(x))
    train, held = order[: 2 * len(x) // 3], order[2 * len(x) // 3 :]
    fit: dict = {}
    if task == "ranking":  # queries of 10 consecutive training rows, graded 0-4 by the target's quintile
        y = np.digitize(y, np.quantile(y, [0.2, 0.4, 0.6, 0.8]))
        train = train[: len(train) // 10 * 10]
        fit = {"group": [10] * (len(train) // 10)}
    if library == "xgboost":
        import xgboost

        kind = {"values": xgboost.XGBRegressor, "ranking": xgboost.XGBRanker}.get(task, xgboost.XGBClassifier)
        model = kind(n_estimators=12, max_depth=3, random_state=0, n_jobs=1).fit(x[train], y[train], **fit)
        native = model.get_booster()
    elif library == "lightgbm":
        import lightgbm

        kind = {"values": lightgbm.LGBMRegressor, "ranking": lightgbm.LGBMRanker}.get(task, lightgbm.LGBMClassifier)
        model = kind(n_estimators=12, num_leaves=7, random_state=0, n_jobs=1, verbose=-1).fit(x[train], y[train], **fit)
        native = model.booster_
    else:
        import catboost

        kind = {"values": catboost.CatBoostRegressor, "ranking": catboost.CatBoostRanker}.get(
            task, catboost.CatBoostClassifier
        )
        fit = {"group_id": np.repeat(np.arange(len(train) // 10), 10)} if task == "ranking" else {}
        model = kind(iterations=12, depth=3, random_seed=0, thread_count=1, verbose=0, allow_writing_files=False)
        native = model.fit(x[train], y[train], **fit)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{library}_{task}"
    if form == "pickle":
        path = folder / f"{stem}.joblib"
        joblib.dump(model, path)
    else:
        path = folder / f"{stem}.{TREE_FILES[library]}"
        native.save_model(str(path))
    rows = folder / f"{stem}.npz"
    np.savez(rows, X=x[held], **({} if task in ("values", "ranking") else {"labels": y[held].astype(np.int64)}))
    return path, rows
