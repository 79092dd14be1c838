"""The metric a user of PaddleOCR's text detector cares about, written as that user would: does the
probability map, binarised where RapidOCR binarises it (its DB post-process: `thresh: 0.3`), cover the
text that is on the page? Pixel F1 against the rendered text lines' boxes (`text_mask`, the eval data's
labels), pooled over every page. Numpy only: no pipeline code.

    python -m pipeline add ppocr_det ch_PP-OCRv4_det_infer.onnx --eval eval.npz \
        --metric metric.py:text_f1 --threshold sigmoid_0.tmp_0=0.3
"""

import numpy as np

THRESHOLD = 0.3  # rapidocr_onnxruntime/config.yaml, Det.thresh


def text_f1(outputs, labels):
    """F1 of the text pixels found (probability >= 0.3) against the pages' text-line boxes."""
    found = outputs["sigmoid_0.tmp_0"] >= THRESHOLD
    truth = labels["text_mask"].astype(bool)
    hits = np.count_nonzero(found & truth)
    return 2 * hits / (np.count_nonzero(found) + np.count_nonzero(truth))
