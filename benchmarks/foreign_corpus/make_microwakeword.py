"""microwakeword_okay_nabu/: the "Okay Nabu" microWakeWord model the pymicro-wakeword wheel ships, a FULLY
INTEGER-QUANTIZED streaming TFLite model (int8 input [1,3,40], uint8 output [1,1]) that keeps its own state in
resource variables between invokes, fed real (synthesised) speech through the package's own feature frontend.

Speech: espeak-ng says "okay nabu" in four voices and four other phrases (negatives), each between silences,
16 kHz int16. Each utterance goes through pymicro_wakeword.MicroWakeWordFeatures (pymicro-features' MicroFrontend,
one 40-value feature vector per 10 ms) and is quantized and strided exactly as MicroWakeWord.process_streaming_prob
does (3 feature vectors per invoke, round(x / scale + zero_point) as int8). The rows are every invoke of every
utterance in stream order; the model only gives the package's probabilities when run in that order from a fresh
interpreter at each 'stream_start' row. The package itself (its bundled libtensorflowlite_c) was run over the same
audio and its per-invoke probabilities are kept as labels.

    python -m benchmarks.foreign_corpus.make_microwakeword OUT
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType
from pymicro_wakeword import MicroWakeWord, MicroWakeWordFeatures, Model
from scipy.io import wavfile
from scipy.signal import resample_poly

from benchmarks.foreign_corpus._common import (
    copy_from_wheel,
    file_facts,
    pinned,
    save_eval,
    tflite_facts,
    wheel_file,
    write_model_readme,
)

DIST, MODEL, CONFIG = (
    "pymicro-wakeword",
    "pymicro_wakeword/models/okay_nabu.tflite",
    "pymicro_wakeword/models/okay_nabu.json",
)
INPUT = "input_audio"  # its serving_default signature's name (the tensor is 'serving_default_input_audio:0')
UTTERANCES = [  # (espeak-ng options, text, is the wake word)
    (["-v", "en-us"], "okay nabu", True),
    (["-v", "en-gb", "-s", "140"], "okay nabu", True),
    (["-v", "en-us+f3", "-s", "160"], "okay, nabu", True),
    (["-v", "en-gb-x-rp", "-p", "35"], "okay nabu", True),
    (["-v", "en-us"], "okay google", False),
    (["-v", "en-gb"], "hey jarvis", False),
    (["-v", "en-us+f3"], "the weather is nice today", False),
    (["-v", "en-gb-x-rp"], "I bought a new banana", False),
]
SR, LEAD, TAIL = 16000, 0.5, 1.0  # seconds of silence before and after each phrase


def speech(audio_dir: Path) -> list[np.ndarray]:
    """Each phrase: espeak-ng's 22050 Hz int16, resampled to 16 kHz int16, 0.5 s of silence before, 1 s after."""
    audio_dir.mkdir(parents=True, exist_ok=True)
    clips = []
    for k, (options, text, _) in enumerate(UTTERANCES, 1):
        wav = audio_dir / f"wakeword_{k}.wav"
        subprocess.run(["espeak-ng", *options, "-w", str(wav), text], check=True)
        rate, x = wavfile.read(wav)
        assert rate == 22050, rate
        x = resample_poly(x.astype(np.float64), 320, 441)
        x = np.concatenate([np.zeros(int(LEAD * SR)), x, np.zeros(int(TAIL * SR))])
        clips.append(np.clip(np.round(x), -32768, 32767).astype(np.int16))
    return clips


def main(out: Path) -> None:
    dst = out / "microwakeword_okay_nabu"
    model_file = copy_from_wheel(DIST, MODEL, dst)
    config = json.loads(wheel_file(DIST, CONFIG).read_text())
    cutoff, window = config["micro"]["probability_cutoff"], config["micro"]["sliding_window_size"]
    clips = speech(out / "sources" / "audio")

    rows, starts, utterance, wake, package_probs, package_means = [], [], [], [], [], []
    for k, clip in enumerate(clips):
        features = list(MicroWakeWordFeatures().process_streaming(clip.tobytes()))
        detector = MicroWakeWord.from_builtin(Model.OKAY_NABU)  # a fresh interpreter: the package's reset()
        scale, zero, stride = detector.input_scale, detector.input_zero_point, detector.stride
        for i in range(0, len(features) - stride + 1, stride):
            chunk = np.concatenate(features[i : i + stride], axis=1)  # [1, 3, 40] float features
            rows.append(np.round(chunk / scale + zero).astype(np.int8)[0])  # process_streaming_prob's quantization
            mean = None
            for f in features[i : i + stride]:
                mean = detector.process_streaming_prob(f)
            package_probs.append(detector._probabilities[-1])  # the dequantized output of this very invoke
            package_means.append(mean)
            starts.append(i == 0)
            utterance.append(k)
            wake.append(UTTERANCES[k][2])
        detector.close()
    inputs = np.stack(rows)
    save_eval(dst, {
        INPUT: inputs,
        "stream_start": np.array(starts), "utterance": np.array(utterance, np.int64), "wake_word": np.array(wake),
        "package_probability": np.array(package_probs, np.float32),
    })  # fmt: skip

    # The same rows through ai-edge-litert: a fresh interpreter at each stream start, rows in order; without the
    # default XNNPACK delegate (as the package's TfLiteInterpreterCreate(model, NULL)) and with it.
    def replay(resolver: OpResolverType) -> tuple[np.ndarray, tuple[float, int]]:
        raw = []
        for row, start in zip(inputs, starts, strict=True):
            if start:
                interpreter = Interpreter(model_path=str(dst / model_file), experimental_op_resolver_type=resolver)
                interpreter.allocate_tensors()
                (inp,), (outp,) = interpreter.get_input_details(), interpreter.get_output_details()
            interpreter.set_tensor(inp["index"], row[None])
            interpreter.invoke()
            raw.append(int(interpreter.get_tensor(outp["index"])[0, 0]))
        return np.array(raw), outp["quantization"]

    raw, (o_scale, o_zero) = replay(OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    xnnpack, _ = replay(OpResolverType.AUTO)
    probs = (raw.astype(np.float32) - o_zero) * o_scale
    package_q = np.round(np.array(package_probs) / o_scale + o_zero).astype(int)
    xnn_diff = np.abs(xnnpack - package_q)
    same = int((np.abs(probs - np.array(package_probs)) < 1e-6).sum())
    per_utt = []
    for k, (options, text, is_wake) in enumerate(UTTERANCES):
        p = probs[np.array(utterance) == k]
        means = [statistics.mean(p[j - window + 1 : j + 1]) for j in range(window - 1, len(p))]
        peak = max(means)
        per_utt.append(f"  utterance {k} {text!r} ({' '.join(options)}; wake word: {is_wake}): {len(p)} invokes, "
                       f"max raw {p.max():.3f}, max {window}-mean {peak:.3f} -> "
                       f"{'DETECTED' if peak > cutoff else 'not detected'}")  # fmt: skip
    run = f"""ai-edge-litert without the default XNNPACK delegate (BUILTIN_WITHOUT_DEFAULT_DELEGATES, as the package
creates its interpreter), rows in order, a fresh interpreter at each 'stream_start' row:
  output uint8 [{len(raw)},1] raw min={raw.min()} max={raw.max()}; dequantized (q - {o_zero}) * {o_scale} = probability
  equal to the package's own per-invoke probability ('package_probability', pymicro-wakeword's bundled
  libtensorflowlite_c through MicroWakeWord.process_streaming_prob) on {same}/{len(raw)} rows
  with ai-edge-litert's default resolver (XNNPACK delegate for the int8 ops): equal on
  {int((xnn_diff == 0).sum())}/{len(raw)} rows, up to {int(xnn_diff.max())} output steps (of {o_scale}) apart:
  the rounding differences compound through the state
{chr(10).join(per_utt)}"""

    version = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True, check=True).stdout.split()
    espeak = version[version.index("text-to-speech:") + 1]
    facts = f"""{file_facts(dst, [model_file])}
{tflite_facts(dst / model_file)}
{CONFIG}: {json.dumps(config)}"""
    notes = f"""- A microWakeWord v2 streaming model (Kevin Ahrendt's, as ESPHome runs it on microcontrollers; trained
  for {", ".join(config.get("trained_languages", []))}), converted with full-integer quantization: int8 input,
  uint8 output, int8 weights and activations, int32 biases. Batch fixed to 1.
- STATEFUL: the model keeps ring buffers of past activations in resource variables (VAR_HANDLE, READ_VARIABLE,
  ASSIGN_VARIABLE, initialised by a CALL_ONCE subgraph), so each invoke consumes the next 3 feature frames (30 ms) of
  one stream and its output depends on every earlier invoke since the interpreter was created. eval.npz's rows are
  the invokes of {len(UTTERANCES)} streams in order; 'stream_start' marks each stream's first row (the package calls
  reset(), which recreates the interpreter). Rows run independently, or as one batch, give other numbers.
- Input '{INPUT}' int8 [1,3,40], scale {scale:.9g}, zero point {zero}: 3 consecutive 10-ms steps of the
  40 float features the TFLite-Micro audio frontend compiled into pymicro-features (micro_features_cpp.create_frontend,
  microWakeWord's feature settings) makes, quantized by the package: round(features / {scale:.9g} + {zero}) as
  int8 (pymicro_wakeword/microwakeword.py, MicroWakeWord.process_streaming_prob).
- What the package reads from the output (pymicro_wakeword/microwakeword.py, process_streaming_prob and
  process_streaming): output uint8 [1,1], scale {o_scale}, zero point {o_zero}:
  probability = (q - {o_zero}) * {o_scale};
  the mean of the last {window} probabilities (sliding_window_size, {CONFIG}) is compared with
  probability_cutoff {cutoff}: wake word detected when mean > {cutoff}. 0.0 is returned until {window} invokes have run.
- The wheel ships three more models of the same form (hey_jarvis, hey_mycroft, alexa .tflite + .json) and its own
  libtensorflowlite_c.so, which MicroWakeWord drives through ctypes.
- Eval labels (no inputs): 'stream_start', 'utterance' (index into the phrases below), 'wake_word' (the phrase is
  "okay nabu"), 'package_probability' (the package's dequantized output for that invoke)."""
    how = f"""espeak-ng {espeak} phrases (WAVs in ../sources/audio/wakeword_*.wav):
{chr(10).join(f"  {k}: {' '.join(o)} {t!r}  wake word: {w}" for k, (o, t, w) in enumerate(UTTERANCES))}
22050 Hz int16 -> scipy.signal.resample_poly(x, 320, 441) -> 16 kHz int16, {LEAD} s of silence before and {TAIL} s
after.
Each stream -> pymicro_wakeword.MicroWakeWordFeatures().process_streaming(int16 bytes) ({pinned("pymicro-features")}
MicroFrontend, one [1,1,40] float vector per 10 ms) -> groups of 3 in order -> concatenated [1,3,40] ->
round(x / {scale:.9g} + {zero}).astype(int8): int8 [{len(inputs)},3,40]."""
    note = (
        "full-integer TFLite (int8 input [1,3,40] scale 0.102 zp -128, uint8 output [1,1] scale 1/256), "
        "STATEFUL streaming model (resource variables, CALL_ONCE): rows are consecutive invokes, reset at stream_start"
    )
    write_model_readme(dst, model_file, (DIST, MODEL), "tflite", facts, how, notes, note, [INPUT],
                       producer="TFLite converter (full-integer quantization)", run=run)  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1]))
