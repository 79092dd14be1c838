"""OpenVINO passes: conversion to IR, NNCF quantization, NNCF's accuracy-controlled search, and the stateful
decoders openvino-genai runs."""
