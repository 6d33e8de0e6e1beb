"""The tiny preset's bf16-vs-FP8 comparison on one thread, its results as JSON on stdout (what
the ``finetune_tiny`` fixture reads back; one thread, so the numbers do not depend on the cores)."""

import json
import sys

import torch

from fp8ref.finetune import FinetuneConfig, compare

torch.set_num_threads(1)
json.dump(compare(FinetuneConfig(preset="tiny")), sys.stdout)
