"""Model repositories for off-the-shelf servers, written under deploy/<model>/serving/ from the
manifest's measurements (`python -m pipeline serving deploy/<model>`): Triton (triton.py), OpenVINO
Model Server (ovms.py) and KServe InferenceServices for both (kserve.py), each checked against the
artifact before it is kept (check.py). write.py writes them all."""
