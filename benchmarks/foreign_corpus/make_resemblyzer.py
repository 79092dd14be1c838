"""resemblyzer/: Resemblyzer's speaker encoder as a user of PyTorch code finds it: the VoiceEncoder class copied
out of resemblyzer/voice_encoder.py into net.py (benchmarks/foreign_corpus/nets/resemblyzer.py: `build()`, no
resemblyzer import) and the wheel's pretrained.pt, a training script's checkpoint ({"step", "model_state",
"optimizer_state"}; the package loads model_state with strict=False, dropping the GE2E loss's two parameters),
fed mel spectrograms of real speech cut into partial utterances as VoiceEncoder.embed_utterance does.

Speech: make_silero's three sentences, each spoken by six espeak-ng voices (the speakers).

    python -m benchmarks.foreign_corpus.make_resemblyzer OUT
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from scipy.io import wavfile
from scipy.signal import get_window, resample_poly

from benchmarks.foreign_corpus._common import copy_from_wheel, file_facts, save_eval, write_model_readme
from benchmarks.foreign_corpus.make_silero import SENTENCES

DIST, WEIGHTS = "resemblyzer", "resemblyzer/pretrained.pt"
NET = Path(__file__).with_name("nets") / "resemblyzer.py"
VOICES = ["en-gb", "en-us", "en-gb-scotland", "en-029", "en-gb+f3", "en-us+f4"]  # espeak-ng -v
# resemblyzer/hparams.py; embed_utterance's defaults rate=1.3, min_coverage=0.75
SR, N_FFT, HOP, N_MELS, PARTIAL, RATE, MIN_COVERAGE, TARGET_DBFS = 16000, 400, 160, 40, 160, 1.3, 0.75, -30
ROWS = 48


def mel_filters() -> np.ndarray:
    """librosa.filters.mel(sr=16000, n_fft=400, n_mels=40): Slaney's mel scale and area normalisation
    (librosa's defaults, htk=False, norm='slaney'), written out in numpy."""

    def hz_to_mel(f: np.ndarray) -> np.ndarray:
        mel = f / (200 / 3)
        return np.where(f >= 1000, 15 + np.log(np.maximum(f, 1e-10) / 1000) / (np.log(6.4) / 27), mel)

    def mel_to_hz(m: np.ndarray) -> np.ndarray:
        return np.where(m >= 15, 1000 * np.exp(np.log(6.4) / 27 * (m - 15)), m * (200 / 3))

    fft_freqs = np.linspace(0, SR / 2, 1 + N_FFT // 2)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(np.array(0.0)), hz_to_mel(np.array(SR / 2)), N_MELS + 2))
    ramps = mel_f[:, None] - fft_freqs[None, :]
    fdiff = np.diff(mel_f)
    lower, upper = -ramps[:-2] / fdiff[:-1, None], ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    return weights * (2.0 / (mel_f[2:] - mel_f[:-2]))[:, None]


def mel_spectrogram(wav: np.ndarray) -> np.ndarray:
    """resemblyzer.audio.wav_to_mel_spectrogram: librosa.feature.melspectrogram (centred frames, zero-padded as
    librosa >= 0.10 pads, a periodic Hann window, power 2), not log; [frames, 40]."""
    padded = np.pad(wav, N_FFT // 2)
    count = 1 + len(wav) // HOP
    window = get_window("hann", N_FFT)
    frames = np.stack([padded[i * HOP : i * HOP + N_FFT] for i in range(count)]) * window
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    return (power @ mel_filters().T).astype(np.float32)


def partials(wav: np.ndarray) -> list[np.ndarray]:
    """VoiceEncoder.compute_partial_slices(len(wav), rate=1.3, min_coverage=0.75) and embed_utterance: the wav
    zero-padded to the last slice's end, its mel spectrogram cut into 160-frame partials every 77 frames."""
    n_frames = int(np.ceil((len(wav) + 1) / HOP))
    step = int(np.round((SR / RATE) / HOP))
    starts = list(range(0, max(1, n_frames - PARTIAL + step + 1), step))
    coverage = (len(wav) - starts[-1] * HOP) / (PARTIAL * HOP)
    if coverage < MIN_COVERAGE and len(starts) > 1:
        starts.pop()
    end = (starts[-1] + PARTIAL) * HOP
    mel = mel_spectrogram(np.pad(wav, (0, max(0, end - len(wav)))))
    return [mel[s : s + PARTIAL] for s in starts]


def utterance(wav_file: Path, voice: str, text: str) -> np.ndarray:
    """espeak-ng's 22050 Hz speech at 16 kHz, raised to -30 dBFS as resemblyzer.audio.preprocess_wav does
    (normalize_volume, increase only)."""
    subprocess.run(["espeak-ng", "-v", voice, "-w", str(wav_file), text], check=True)
    rate, x = wavfile.read(wav_file)
    assert rate == 22050, rate
    wav = resample_poly(x.astype(np.float64) / 32768.0, 320, 441)
    change = TARGET_DBFS - 20 * np.log10(np.sqrt(np.mean((wav * 32767) ** 2)) / 32767)
    return wav * 10 ** (change / 20) if change > 0 else wav


def main(out: Path) -> None:
    audio_dir = out / "sources" / "audio" / "voices"
    audio_dir.mkdir(parents=True, exist_ok=True)
    rows, who = [], []
    for voice in VOICES:
        for s, (_, text) in enumerate(SENTENCES, 1):
            cut = partials(utterance(audio_dir / f"{voice}_s{s}.wav", voice, text))
            rows += cut
            who += [f"{voice}/s{s}"] * len(cut)
    idx = np.linspace(0, len(rows) - 1, ROWS).round().astype(int)
    dst = out / "resemblyzer"
    weights = copy_from_wheel(DIST, WEIGHTS, dst)
    shutil.copy(NET, dst / "net.py")
    save_eval(dst, {"mels": np.stack(rows)[idx]})
    facts = f"""{file_facts(dst, [weights, "net.py"])}
{weights}: a legacy (pre-zip) torch.save of a training checkpoint dict {{"step", "model_state", "optimizer_state"}};
model_state holds the LSTM (3 layers, 40 -> 256), linear (256 -> 256) and the GE2E loss's similarity_weight and
similarity_bias, which the network has not: resemblyzer loads it with load_state_dict(..., strict=False).
net.py: VoiceEncoder of resemblyzer/voice_encoder.py (Apache-2.0), hparams inlined, device and weight loading
left out; build() -> VoiceEncoder().eval()."""
    notes = """- A training script's checkpoint, not a state_dict: the network's weights are under 'model_state', beside
  two tensors of the training loss (GE2E's similarity_weight, similarity_bias) that no layer of the network owns.
- nn.LSTM (batch_first) over 160 frames; the embedding is the last layer's final hidden state through
  Linear + ReLU, L2-normalised: the output is an embedding, compared by cosine similarity."""
    how = f"""Speech: make_silero's three sentences ({"; ".join(t for _, t in SENTENCES)!r}), each spoken by six
espeak-ng voices {VOICES} (the speakers); WAVs in ../sources/audio/voices/. Each utterance as
resemblyzer.preprocess_wav does: 22050 Hz -> 16 kHz (scipy resample_poly 320/441, where resemblyzer uses librosa's),
volume raised to {TARGET_DBFS} dBFS (increase only); webrtcvad's trimming of long silences left out (espeak-ng's
utterances have none). Then VoiceEncoder.embed_utterance's partials (rate {RATE}/s, min_coverage {MIN_COVERAGE}):
the mel spectrogram (librosa.feature.melspectrogram: n_fft {N_FFT}, hop {HOP}, {N_MELS} Slaney mels, power, not
log; written out in numpy) cut into {PARTIAL}-frame windows -> {len(rows)} partials; {ROWS} evenly spaced kept:
{[who[i] for i in idx]}.
'mels' float32 [{ROWS},{PARTIAL},{N_MELS}]. No labels array: the speaker of each row is listed above."""
    note = (
        "PyTorch code + a training checkpoint dict: weights under 'model_state' plus two loss parameters the "
        "network lacks (the package loads with strict=False); 3-layer LSTM to an L2-normalised embedding"
    )
    flags = ["--weights", weights, "--input", f"mels={PARTIAL},{N_MELS}"]
    write_model_readme(dst, "net.py:build", (DIST, WEIGHTS), "torch", facts, how, notes, note, ["mels"], flags,
                       producer="Resemblyzer 0.1.4 (a training checkpoint)")  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1]))
