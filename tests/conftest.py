import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# The tutorial's exact numbers are float32 on the CPU: `--device auto` must not pick a GPU in the tests, in this
# process (the fixture below) or in the command lines they start (no CUDA device visible).
os.environ["CUDA_VISIBLE_DEVICES"] = ""

TINYSTORIES = ROOT.parent / "shared" / "data" / "tinystories-1M.txt"


@pytest.fixture
def tinystories_text():
    if not TINYSTORIES.is_file():
        print(f"skipping: {TINYSTORIES} is absent")
        pytest.skip(f"{TINYSTORIES} is absent (benchmark/acceptance data only)")
    return TINYSTORIES.read_text(encoding="utf-8")[:1_000_000]


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch):
    from gptcore import device

    monkeypatch.setattr(device, "accelerators", lambda: [])
