"""Shared paths for the pytest suite (run by ctest with /usr/bin/python3 and
PYTHONPATH=<repo>/python; FPGALLM_BINARY names the fpgallm command)."""
import os
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

MODEL = str(REPO / "models" / "stories260K.bin")
TOKENIZER = str(REPO / "models" / "tok512.bin")
SAMPLE_TEXT = str(REPO / "models" / "tinystories-valid-sample.txt")


def fpgallm_binary() -> str:
    path = os.environ.get("FPGALLM_BINARY", str(REPO / "build" / "fpgallm"))
    if not os.path.exists(path):
        pytest.skip(f"fpgallm binary not built at {path} (set FPGALLM_BINARY)")
    return path
