#!/usr/bin/env bash
# Set up a checkout for `pytest -m cpu`: a virtual environment in .venv with torch, fp8ref and
# its test and fine-tune extras. Then: .venv/bin/pytest -m cpu
#   TORCH="torch==2.13.0" bash scripts/setup.sh    # a particular torch (default: the newest pip finds)
#   EXTRAS="test,gpu" bash scripts/setup.sh         # a GPU runner
#   VENV=/path/to/venv bash scripts/setup.sh        # another place than .venv
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv}"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
# torch first, on its own, so that the build pip chooses (CPU or CUDA) is the one asked for
"$venv/bin/python" -m pip install --quiet "${TORCH:-torch}"
# compat: the checkout's folder on sys.path, so `python -m fp8ref` works from any folder, also the
# one holding a checkout named fp8ref (which setuptools' default editable finder would leave to a
# namespace package)
"$venv/bin/python" -m pip install --quiet -e ".[${EXTRAS:-test,finetune}]" --config-settings editable_mode=compat
"$venv/bin/python" -c "import torch, fp8ref; print('fp8ref', fp8ref.__version__, 'with torch', torch.__version__)"
echo "ready: $venv/bin/pytest -m cpu"
