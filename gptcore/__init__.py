"""gptcore: the tutorial's LLaMA-style character GPT, its data, training and the math behind every page."""
import os

# Idle OpenMP workers must sleep rather than spin: spinning threads starve the UI and collapse a
# two-thread matmul when another process competes for the CPU. Only read before torch first loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
