"""basic_pitch/: Spotify's basic-pitch note transcriber as the wheel ships it for TensorFlow, the SavedModel folder
`nmp` (written by TF 2.4 with Keras 2 and its optimizer state: TF >= 2.16 cannot revive it, the pipeline reads it
with TensorFlow's TF1 loader), fed real music with the notes known.

Music: three Bach chorales from the music21 wheel's corpus (MusicXML scores, four voices), rendered note by note
with a plain harmonic tone; the notes sounding at each of the model's frames are the labels (`note_roll`), read by
the user's metric beside the model (metrics/basic_pitch.py: frame F1 where basic-pitch's own note creation
thresholds the note map). The audio is windowed as basic_pitch.inference.get_audio_input does.

    python -m benchmarks.foreign_corpus.make_basic_pitch OUT
"""

from __future__ import annotations

import re
import shutil
import sys
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
from scipy.io import wavfile

from benchmarks.foreign_corpus._common import (
    copy_folder_from_wheel,
    file_facts,
    save_eval,
    wheel_file,
    write_model_readme,
)

DIST, MODEL = "basic-pitch", "basic_pitch/saved_models/icassp_2022/nmp"
CHORALES = ["bach/bwv66.6.mxl", "bach/bwv1.6.mxl", "bach/bwv269.mxl"]  # in the music21 wheel's corpus
METRIC = Path(__file__).with_name("metrics") / "basic_pitch.py"
# basic_pitch.constants: 22050 Hz, FFT_HOP 256, AUDIO_N_SAMPLES = 22050 * 2 - 256; inference.run_inference
# overlaps windows by 30 frames and pads the start by half of that
SR, HOP, WINDOW, OVERLAP = 22050, 256, 43844, 30 * 256
FRAMES, PITCHES, LOWEST = 172, 88, 21  # the note output's frames per window and piano keys (MIDI 21 = A0)
ROWS = 16


def notes(mxl: Path) -> list[tuple[float, float, int]]:
    """(start s, end s, MIDI pitch) of every note in a MusicXML score (one voice a part, as the chorales are), at
    the score's <sound tempo> (quarter notes a minute); a tie extends the note it continues."""
    with zipfile.ZipFile(mxl) as z:
        xml = next(n for n in z.namelist() if n.endswith(".xml") and not n.startswith("META-INF"))
        root = ElementTree.fromstring(z.read(xml))
    sound = root.find(".//sound[@tempo]")
    seconds_per_quarter = 60 / float(sound.get("tempo") if sound is not None else 96)
    found = []
    for part in root.iter("part"):
        t, divisions, open_ties = 0.0, 1, {}
        for element in part.iter():
            if element.tag == "divisions":
                divisions = int(element.text)
            elif element.tag in ("backup", "forward"):
                step = int(element.findtext("duration")) / divisions * seconds_per_quarter
                t += step if element.tag == "forward" else -step
            elif element.tag == "note" and element.find("chord") is None:
                length = int(element.findtext("duration", "0")) / divisions * seconds_per_quarter
                pitch = element.find("pitch")
                if pitch is not None:
                    semitone = "C D EF G A B".index(pitch.findtext("step"))
                    midi = (
                        12 * (int(pitch.findtext("octave")) + 1) + semitone + int(float(pitch.findtext("alter", "0")))
                    )
                    ties = {tie.get("type") for tie in element.findall("tie")}
                    if "stop" in ties and midi in open_ties:
                        i = open_ties.pop(midi)
                        found[i] = (found[i][0], t + length, midi)
                    else:
                        found.append((t, t + length, midi))
                    if "start" in ties:
                        open_ties[midi] = i if "stop" in ties else len(found) - 1
                t += length
    return sorted(found)


def render(score: list[tuple[float, float, int]]) -> np.ndarray:
    """Each note a harmonic tone (8 partials falling by 0.6 each), 10 ms attack, decaying, 30 ms release."""
    audio = np.zeros(int(max(end for _, end, _ in score) * SR) + SR // 2, np.float64)
    for start, end, midi in score:
        n = int((end - start) * SR)
        t = np.arange(n) / SR
        f0 = 440 * 2 ** ((midi - 69) / 12)
        tone = sum(0.6**k * np.sin(2 * np.pi * (k + 1) * f0 * t) for k in range(8) if (k + 1) * f0 < SR / 2)
        envelope = np.minimum(1, t / 0.01) * np.exp(-t / 1.5) * np.minimum(1, (n - np.arange(n)) / (0.03 * SR))
        audio[int(start * SR) : int(start * SR) + n] += 0.15 * tone * envelope
    return (audio / np.abs(audio).max() * 0.9).astype(np.float32)


def roll(score: list[tuple[float, float, int]], start: int) -> np.ndarray:
    """The keys sounding at each of a window's output frames: frame j is at sample start + j * HOP of the padded
    audio, i.e. (start + j * HOP - OVERLAP / 2) / SR seconds into the piece."""
    times = (start + np.arange(FRAMES) * HOP - OVERLAP // 2) / SR
    out = np.zeros((FRAMES, PITCHES), np.uint8)
    for begin, end, midi in score:
        out[(times >= begin) & (times < end), midi - LOWEST] = 1
    return out


def main(out: Path) -> None:
    audio_dir = out / "sources" / "audio"
    audio_dir.mkdir(parents=True, exist_ok=True)
    windows, rolls, where = [], [], []
    for name in CHORALES:
        score = notes(wheel_file("music21", f"music21/corpus/{name}"))
        audio = render(score)
        wavfile.write(audio_dir / f"{Path(name).stem}.wav", SR, audio)
        # basic_pitch.inference.get_audio_input: OVERLAP/2 zeros first, windows every WINDOW - OVERLAP, zero-padded
        padded = np.concatenate([np.zeros(OVERLAP // 2, np.float32), audio])
        for start in range(0, len(padded), WINDOW - OVERLAP):
            window = padded[start : start + WINDOW]
            windows.append(np.pad(window, (0, WINDOW - len(window))))
            rolls.append(roll(score, start))
            where.append(f"{Path(name).stem}@{start / SR:.2f}s")
    idx = np.linspace(0, len(windows) - 1, ROWS).round().astype(int)
    dst = out / "basic_pitch"
    folder = copy_folder_from_wheel(DIST, MODEL, dst)
    shutil.copy(METRIC, dst / "metric.py")
    inputs = np.stack(windows)[idx, :, None]
    note_roll = np.stack(rolls)[idx]
    save_eval(dst, {"input_2": inputs, "note_roll": note_roll}, compressed=True)
    pb = (dst / folder / "saved_model.pb").read_bytes()
    built_by = sorted({m.decode() for m in re.findall(rb"v2\.\d+\.\d+-[0-9a-z-]+", pb)})
    facts = f"""{file_facts(dst, [folder])}
saved_model.pb names the TensorFlow build that wrote it: {", ".join(built_by) or "(not found)"}
Serving signature (read with tf.compat.v1.saved_model.loader.load in a graph session, TF 2.21): input 'input_2'
float32 [None, 43844, 1]; outputs 'contour' [None, 172, 264], 'note' [None, 172, 88], 'onset' [None, 172, 88]."""
    notes_text = """- A SavedModel written by TF 2.4.1 through Keras 2 with its optimizer's slot variables: TF >= 2.16
  (Keras 3) fails to revive it ("'_UserObject' object has no attribute 'add_slot'"); basic-pitch itself pins
  TF < 2.15.1. The pipeline's rescue reads it with the TF1 loader and wraps the frozen graph back into a TF2 function.
- The model computes its own CQT from raw audio (basic_pitch/layers/nnaudio.py: conv1d with fixed CQT kernels),
  harmonic stacking, then small conv stacks; the three outputs are sigmoids (probabilities per frame and bin).
- The wheel also ships the same model as nmp.onnx, nmp.tflite and nmp.mlpackage; only the SavedModel is used here."""
    how = f"""Three Bach chorales from the music21 wheel's corpus ({", ".join(CHORALES)}: MusicXML, four voices),
parsed with xml.etree (onsets and durations at each score's <sound tempo>, ties joined) and rendered at {SR} Hz:
each note 8 harmonics (amplitude 0.6^k), 10 ms attack, exp(-t/1.5 s) decay, 30 ms release; the sum normalised to
peak 0.9. WAVs kept in ../sources/audio/. Windowed as basic_pitch.inference.get_audio_input does: {OVERLAP // 2}
zeros first, windows of {WINDOW} samples every {WINDOW - OVERLAP}, the last zero-padded -> {len(windows)} windows;
{ROWS} evenly spaced kept: {[where[i] for i in idx]}.
'input_2' float32 [{ROWS},{WINDOW},1]; 'note_roll' uint8 [{ROWS},{FRAMES},{PITCHES}]: the piano keys (MIDI 21..108)
sounding at each output frame (frame j at (window start + j*{HOP} - {OVERLAP // 2}) / {SR} s), what the 'note' output
estimates; metric.py:note_f1 scores it (a copy of benchmarks/foreign_corpus/metrics/basic_pitch.py)."""
    note = (
        "TF2 SavedModel written through Keras 2 with optimizer slots (TF >= 2.16 cannot revive it: the TF1 loader "
        "rescue), raw-audio input [N,43844,1] with an in-graph CQT, three sigmoid outputs"
    )
    flags = ["--metric", "metric.py:note_f1", "--threshold", "note=0.3"]
    write_model_readme(dst, folder, (DIST, MODEL), "savedmodel", facts, how, notes_text, note, ["input_2"], flags,
                       producer=f"tensorflow {built_by[0]}" if built_by else "")  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1]))
