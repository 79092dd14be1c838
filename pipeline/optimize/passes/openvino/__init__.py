"""OpenVINO passes: conversion to IR, NNCF quantization, and NNCF's accuracy-controlled search."""
