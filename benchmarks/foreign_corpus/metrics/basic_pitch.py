"""The metric a user of basic-pitch cares about, written as that user would: are the notes that sound found
where basic-pitch's own note creation looks for them (basic_pitch.inference.predict: `frame_threshold=0.3` on
the note map)? Frame-level F1 of the keys found against the score's (`note_roll`, the eval data's labels),
pooled over every window. Numpy only: no pipeline code.

    python -m pipeline add basic_pitch nmp --eval eval.npz --metric metric.py:note_f1 --threshold note=0.3
"""

import numpy as np

THRESHOLD = 0.3  # basic_pitch.inference.predict: frame_threshold


def note_f1(outputs, labels):
    """F1 of the (frame, key) cells found (note probability >= 0.3) against the keys the score sounds."""
    found = outputs["note"] >= THRESHOLD
    truth = labels["note_roll"].astype(bool)
    hits = np.count_nonzero(found & truth)
    return 2 * hits / (np.count_nonzero(found) + np.count_nonzero(truth))
