"""silero_vad/ and silero_vad_op15/: the two voice-activity detectors silero-vad ships (a spox export and a
torch.onnx one), fed real speech. A stateful model is only exercised properly with the recurrent state it
would really carry, so the package's streaming protocol is replayed over a clip and the (input, state) pairs
it produced at 24 chunks are stacked: running that batch gives the sequential probabilities back.

Speech: three fixed sentences synthesised by Debian's espeak-ng, with silences between them.

    python -m benchmarks.foreign_corpus.make_silero OUT
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from scipy.io import wavfile
from scipy.signal import resample_poly

from benchmarks.foreign_corpus._common import copy_from_wheel, save_eval, wheel_file, write_readme

DIST = "silero-vad"
SENTENCES = [  # (espeak-ng options, text)
    ([], "The quick brown fox jumps over the lazy dog near the river bank."),
    (["-s", "140"], "Please remember to save your work before the meeting starts at nine o'clock tomorrow morning."),
    (["-v", "en-us"], "Voice activity detection separates speech from silence and background noise."),
]
SR, CHUNK, CONTEXT, ROWS = 16000, 512, 64, 24


def speech(audio_dir: Path) -> np.ndarray:
    """0.5 s of silence, then each sentence (espeak-ng's 22050 Hz int16, resampled to 16 kHz) and 0.6 s of silence."""
    audio_dir.mkdir(parents=True, exist_ok=True)
    parts = [np.zeros(SR // 2, np.float32)]
    for k, (options, text) in enumerate(SENTENCES, 1):
        wav = audio_dir / f"s{k}.wav"
        subprocess.run(["espeak-ng", *options, "-w", str(wav), text], check=True)
        rate, x = wavfile.read(wav)
        assert rate == 22050, rate
        resampled = resample_poly(x.astype(np.float32) / 32768.0, 320, 441).astype(np.float32)
        parts += [resampled, np.zeros(9600, np.float32)]
    return np.concatenate(parts)


def replay(model: Path, audio: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """silero_vad.utils_vad.OnnxWrapper at batch 1 over every chunk: input = last 64 samples of the previous input
    + the next 512; state = the previous stateN. Returns every call's input, state and speech probability."""
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    state = np.zeros((2, 1, 128), np.float32)
    context = np.zeros((1, CONTEXT), np.float32)
    inputs, states, probs = [], [], []
    for i in range(len(audio) // CHUNK):
        x = np.concatenate([context, audio[None, i * CHUNK : (i + 1) * CHUNK]], 1)
        inputs.append(x[0])
        states.append(state[:, 0])
        out, state = sess.run(None, {"input": x, "state": state, "sr": np.array(SR, np.int64)})
        probs.append(float(out[0, 0]))
        context = x[:, -CONTEXT:]
    return np.stack(inputs), np.stack(states, 1), np.array(probs)


def main(out: Path) -> None:
    audio = speech(out / "sources" / "audio")
    n = len(audio) // CHUNK
    inputs, states, probs = replay(wheel_file(DIST, "silero_vad/data/silero_vad.onnx"), audio)
    idx = np.linspace(8, n - 2, ROWS).round().astype(int)
    version = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True, check=True).stdout.split()
    espeak = version[version.index("text-to-speech:") + 1]
    width = CHUNK + CONTEXT
    how = f"""Speech synthesised with espeak-ng {espeak} from three English sentences
("{SENTENCES[0][1]}" /
"{SENTENCES[1][1]}" (-s 140) /
"{SENTENCES[2][1]}" (-v en-us)); WAVs kept in ../sources/audio/.
22050 Hz int16 -> float32/32768 -> scipy.signal.resample_poly(x,320,441) -> 16 kHz; 0.5 s silence at start,
0.6 s silence after each sentence. Total {len(audio) / SR:.2f} s = {n} chunks of {CHUNK}.
The package's own OnnxWrapper protocol was replayed with batch=1 over all chunks (silero_vad.onnx): input =
concat(last {CONTEXT} samples of previous input (zeros at start), {CHUNK}-sample chunk) -> [1,{width}]; state carried
from the previous call's stateN (zeros at start); sr={SR}.
The (input, state) pairs seen at {ROWS} evenly spaced chunk indices {idx.tolist()} were stacked:
  input [{ROWS},{width}] (batch on axis 0), state [2,{ROWS},128] (BATCH ON AXIS 1), sr = int64 scalar {SR}
  (0-d array, shared by all rows).
Sequential batch=1 speech probabilities at those chunks: {np.round(probs[idx], 3).tolist()}
Because the real per-row recurrent state is included, running the stacked batch reproduces the sequential
probabilities."""

    def extra(outs: list[np.ndarray]) -> list[str]:
        p = outs[0][:, 0]
        return [
            f"batched speech prob vs sequential batch=1 replay (silero_vad.onnx): max abs diff = "
            f"{np.abs(p - probs[idx]).max():.3g}",
            f"rows with prob>0.5: {(p > 0.5).sum()}/{len(p)}; stateN range [{outs[1].min():.4g},{outs[1].max():.4g}]",
        ]

    for folder, relpath, remark, notes, note in [
        (
            "silero_vad",
            "silero_vad/data/silero_vad.onnx",
            "the file load_silero_vad(onnx=True) uses by default, opset 16",
            """- producer 'spox' (not torch.onnx). All weights are in Constant nodes (0 initializers), nested inside If
  subgraphs (sr==16000 / 8000 branches).
- Graph inputs/outputs declare dims with NO dim_value and NO dim_param (unset, not symbolic): 'input' [?,?],
  'state' [2,?,128], outputs fully unset for stateN.
- 'sr' is a 0-d int64 scalar input (no batch axis). 'state' has its batch axis at position 1, not 0. Output 'stateN'
  same layout [2,batch,128].
- No softmax; final Sigmoid gives speech probability.""",
            "spox export: dims unset (no names), 0-d int64 'sr' read by If subgraphs, state batch axis second "
            "[2,N,128], all weights in Constant nodes inside the If branches",
        ),
        (
            "silero_vad_op15",
            "silero_vad/data/silero_vad_16k_op15.onnx",
            "load_silero_vad(onnx=True, opset_version=15); 16 kHz only",
            """- producer pytorch 2.3.1 (torch.onnx TorchScript exporter), opset 15; If nodes with subgraphs; weights in
  initializers (Constant nodes hold only scalars/shape consts).
- Symbolic dims 'batch','sequence'; 'sr' is a 0-d int64 scalar input; 'state' has batch at axis 1 ([2,'batch',128]).
- Output stateN declared ['AddstateN_dim_0','batch','AddstateN_dim_2'] (real [2,batch,128]).
- No softmax; final Sigmoid gives speech probability.""",
            "torch.onnx opset 15: 0-d int64 'sr' read by If subgraphs, state batch axis second [2,'batch',128], "
            "stateN dims named 'AddstateN_dim_*'",
        ),
    ]:
        dst = out / folder
        model_file = copy_from_wheel(DIST, relpath, dst)
        save_eval(dst, {"input": inputs[idx], "state": states[:, idx], "sr": np.array(SR, np.int64)})
        write_readme(dst, model_file, (DIST, relpath), how, notes, note, extra, source_remark=remark)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
