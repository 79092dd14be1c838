"""guesslang/: guesslang 2.2.1's language guesser, a TF Estimator's SavedModel (issue 74's string SavedModel): one
STRING input (`inputs`, [batch]: a whole source file as one string; its tokenizer and hash buckets are in the graph)
and two outputs, `scores` [batch, 54] float and `classes` [batch, 54] STRING (the languages' file extensions, the
same on every row). The package's Guess.language_name takes the extension of the highest score (model.predict) and
answers None when the top scores are too close (Guess._is_reliable).

Texts: source files of the languages guesslang knows (guesslang/data/languages.json), as other wheels in the
corpus's venv ship them (its site-packages), the first MAX_CHARS characters of up to PER_LANGUAGE files a language,
seeded; `language` (no input) holds each file's extension, what guesslang should answer.

    python -m benchmarks.foreign_corpus.make_guesslang OUT
"""

from __future__ import annotations

import json
import random
import sys
import sysconfig
from pathlib import Path

import numpy as np

from benchmarks.foreign_corpus._common import (
    copy_folder_from_wheel,
    file_facts,
    save_eval,
    wheel_file,
    write_model_readme,
)

DIST, MODEL = "guesslang", "guesslang/data/model"
PER_LANGUAGE, MAX_CHARS, SEED = 6, 2000, 0


def texts() -> tuple[list[str], list[str]]:
    """(text, extension) of the venv's source files whose extension is one of guesslang's languages."""
    extensions = set(json.loads(wheel_file(DIST, "guesslang/data/languages.json").read_text()).values())
    site = Path(sysconfig.get_paths()["purelib"])
    by_extension: dict[str, list[Path]] = {}
    for path in sorted(site.rglob("*.*")):
        extension = path.suffix.lstrip(".").lower()
        if extension in extensions and path.is_file() and "guesslang" not in path.parts:
            by_extension.setdefault(extension, []).append(path)
    rng, found = random.Random(SEED), []
    for extension, paths in sorted(by_extension.items()):
        rng.shuffle(paths)
        for path in paths:
            text = path.read_text(encoding="utf-8", errors="ignore")[:MAX_CHARS]
            if len(text.strip()) >= 50 and sum(e == extension for _, e in found) < PER_LANGUAGE:
                found.append((text, extension))
    return [t for t, _ in found], [e for _, e in found]


def main(out: Path) -> None:
    dst = out / "guesslang"
    folder = copy_folder_from_wheel(DIST, MODEL, dst)
    sources, languages = texts()
    save_eval(dst, {"inputs": np.array(sources), "language": np.array(languages)})
    facts = file_facts(dst, [folder])
    how = (f"{len(sources)} source files of the corpus venv's site-packages, at most {PER_LANGUAGE} per extension "
           f"guesslang knows ({', '.join(sorted(set(languages)))}), the first {MAX_CHARS} characters each, "
           f"seed {SEED}; "
           "'language' (a label: no input) is each file's extension")  # fmt: skip
    notes = (
        "- a TF Estimator export: serving_default takes `inputs` (STRING [batch]) and gives `scores` and "
        "`classes` (STRING [batch, 54]); the package reads the class of the highest score (Guess.language_name)"
    )
    write_model_readme(dst, folder, (DIST, MODEL), "savedmodel", facts, how, notes,
                       "TF Estimator SavedModel: STRING in, STRING classes out (tf2onnx: string operators)",
                       ["inputs"], producer="TensorFlow 2.5 Estimator (guesslang 2.2.1)")  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1]))
