"""profanity_check/: the numeric classifier alt-profanity-check ships (profanity_check/data/model.joblib, a
CalibratedClassifierCV of five LinearSVC folds with sigmoid calibration, pickled with joblib by scikit-learn 1.9.1,
the version its own release number names), fed real numeric inputs: the TF-IDF vectors the wheel's own vectorizer
(profanity_check/data/vectorizer.joblib, copied beside it) makes from real texts, exactly as
profanity_check.predict_prob does.

Texts: the somef maker's README excerpts of 15 wheels (clean prose, code and tables) and every 20th entry of the
offensive-word list the better-profanity wheel ships (single words and short phrases), so that both classes occur.

    python -m benchmarks.foreign_corpus.make_profanity OUT
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import joblib
import numpy as np
import sklearn

from benchmarks.foreign_corpus._common import (
    copy_from_wheel,
    file_facts,
    pinned,
    save_eval,
    wheel_file,
    write_model_readme,
)
from benchmarks.foreign_corpus.make_somef import texts as readme_texts

DIST, MODEL, VECTORIZER = (
    "alt-profanity-check",
    "profanity_check/data/model.joblib",
    "profanity_check/data/vectorizer.joblib",
)
WORDS, EVERY = ("better-profanity", "better_profanity/profanity_wordlist.txt"), 20


def main(out: Path) -> None:
    dst = out / "profanity_check"
    model_file = copy_from_wheel(DIST, MODEL, dst)
    vectorizer_file = copy_from_wheel(DIST, VECTORIZER, dst)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, vectorizer = joblib.load(dst / model_file), joblib.load(dst / vectorizer_file)
    excerpts, _, sources = readme_texts()
    words = wheel_file(*WORDS).read_text().split("\n")
    words = [w.strip() for w in words if w.strip()][::EVERY]
    texts = excerpts + words
    sources = sources + [pinned(WORDS[0])] * len(words)
    features = vectorizer.transform(texts)  # scipy CSR float64, as profanity_check.predict_prob makes it
    inputs = features.toarray()
    import profanity_check  # the package's own path, for the labels

    package = profanity_check.predict_prob(texts)
    save_eval(dst, {"X": inputs, "text": np.array(texts), "source": np.array(sources),
                    "package_probability": package.astype(np.float64)}, compressed=True)  # fmt: skip

    proba = model.predict_proba(inputs)
    agree = float(np.abs(proba[:, 1] - package).max())
    flagged = proba[:, 1] > 0.5
    n_ex = len(excerpts)
    per_fold = [type(c.estimator).__name__ + "/" + "+".join(type(k).__name__ for k in c.calibrators)
                for c in model.calibrated_classifiers_]  # fmt: skip
    svc = model.calibrated_classifiers_[0].estimator
    warned = sorted({str(w.message)[:120] for w in caught}) or "no warnings (the version it was pickled with)"
    facts = f"""{file_facts(dst, [model_file, vectorizer_file])}
{model_file}: joblib pickle of {type(model).__module__}.{type(model).__name__}(
  estimator=LinearSVC(class_weight='balanced',
  dual=False, max_iter=100000, tol=0.01)), method={model.method!r}, cv={model.cv!r}, ensemble={model.ensemble!r};
  n_features_in_={model.n_features_in_}, classes_={model.classes_.tolist()},
  {len(per_fold)} calibrated folds: {per_fold};
  each fold's LinearSVC coef_ {svc.coef_.dtype}{list(svc.coef_.shape)}, intercept_ {list(svc.intercept_.shape)};
  each _SigmoidCalibration has a_ and b_ (p = 1 / (1 + exp(a_ * decision + b_))).
{vectorizer_file}: {type(vectorizer).__name__}(stop_words='english', min_df=0.0001), lowercase word analyzer
  token_pattern {vectorizer.token_pattern!r}, {len(vectorizer.vocabulary_)} terms,
  idf_ {vectorizer.idf_.dtype}{list(vectorizer.idf_.shape)}, norm {vectorizer.norm!r}.
Unpickled with scikit-learn {sklearn.__version__}: {warned}"""
    notes = f"""- The model is a numeric estimator: its input is a [N, {model.n_features_in_}] float64 matrix (the
  package passes the
  vectorizer's sparse CSR output; eval.npz holds it dense, compressed). The vectorizer is no part of model.joblib:
  the package composes them in code, profanity_check/profanity_check.py:
    predict(texts)      = model.predict(vectorizer.transform(texts))            -> 0/1 (1 = offensive)
    predict_prob(texts) = model.predict_proba(vectorizer.transform(texts))[:, 1]
                          (np.apply_along_axis(_get_profane_prob, 1, ...): column 1)
  so the package reads column 1 of predict_proba (probability of class 1, offensive; no threshold of its own:
  predict() is the argmax, i.e. > 0.5 up to ties); predict_proba averages the {len(per_fold)} folds' sigmoid-calibrated
  LinearSVC decision values (CalibratedClassifierCV, ensemble=True).
- Pickled by scikit-learn 1.9.1 and joblib 1.6.0 (alt-profanity-check 1.9.1 requires exactly those): no
  InconsistentVersionWarning with the project's scikit-learn 1.9.1.
- Rows are sparse: most of the {model.n_features_in_} columns are 0; an all-zero row (no known term) still gets
  a probability (the calibrated intercepts alone)."""
    how = f"""{len(texts)} texts: {n_ex} README excerpts (the somef maker's: paragraphs of the METADATA READMEs of
15 wheels, see
somef_description/README.txt) + {len(words)} entries of {pinned(WORDS[0])} {WORDS[1]} (every {EVERY}th line).
'X' = vectorizer.transform(texts).toarray(): float64 [{len(texts)},{inputs.shape[1]}], {features.nnz} non-zeros.
Labels (no inputs): 'text' (the string each row was made from), 'source' (package==version it came from),
'package_probability' (profanity_check.predict_prob(texts), the package's own output)."""
    run = f"""model.predict_proba(X) with scikit-learn {sklearn.__version__}: float64 [{len(texts)},2]; column 1
equals the package's
predict_prob to {agree:.2e}. Probability of 'offensive' > 0.5 on {int(flagged[:n_ex].sum())}/{n_ex} README excerpts and
{int(flagged[n_ex:].sum())}/{len(words)} word-list entries; column 1 min {proba[:, 1].min():.3f}
mean {proba[:, 1].mean():.3f} max {proba[:, 1].max():.3f}."""
    note = (
        f"sklearn CalibratedClassifierCV(LinearSVC) x5 folds, sigmoid calibration, joblib, scikit-learn 1.9.1; numeric "
        f"input float64 [N,{model.n_features_in_}] (TF-IDF from the wheel's separate vectorizer.joblib, mostly zeros)"
    )
    write_model_readme(dst, model_file, (DIST, MODEL), "sklearn", facts, how, notes, note, ["X"],
                       ["--trust-pickle"], producer="scikit-learn 1.9.1 (joblib 1.6.0)", run=run)  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1]))
