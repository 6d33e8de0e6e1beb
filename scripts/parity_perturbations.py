#!/usr/bin/env python3
"""Does the bf16-vs-FP8 parity verdict pass benign changes and fail real FP8 faults?

Runs ``fp8ref.finetune.compare`` (torchao tensorwise, the tiny preset unless told otherwise) once
per perturbation and prints one row each: the FP8 gap against the bf16 mean, the noise floor, the
bound and the verdict. Benign changes alter FP8's arithmetic without making it wrong; faults
break it the way a real regression would. Each is applied by patching torchao for that run only.

    python scripts/parity_perturbations.py                    # all, as markdown rows
    python scripts/parity_perturbations.py --only baseline    # e.g. in another torch's venv
    python scripts/parity_perturbations.py --calibrate 6      # FP8's own cost and the noise: the budget
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fp8ref.finetune import FinetuneConfig, calibrate, compare  # noqa: E402
from fp8ref.finetune.faults import PERTURBATIONS, perturbation  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=list(PERTURBATIONS), default=list(PERTURBATIONS))
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--noise-runs", type=int, default=2)
    ap.add_argument(
        "--calibrate",
        type=int,
        metavar="N",
        help="instead: N bf16 and N FP8 runs from one-ulp-nudged weights; their tails and spreads",
    )
    args = ap.parse_args()
    import torchao

    print(
        f"torch {torch.__version__}, torchao {torchao.__version__}, preset {args.preset}, "
        f"{torch.get_num_threads()} threads, {args.noise_runs} noise runs"
    )
    if args.calibrate:
        c = calibrate(FinetuneConfig(preset=args.preset), args.calibrate)
        for label in ("bf16", "fp8"):
            tails = ", ".join(f"{x:.4f}" for x in c[label]["tails"])
            print(f"{label}: tails {tails}; mean {c[label]['mean']:.4f}, spread {100 * c[label]['spread']:.2f}%")
        print(f"FP8 mean vs bf16 mean: {100 * c['fp8_gap']:+.2f}%")
        return 0
    print("| perturbation | kind | FP8 vs bf16 mean | noise floor | bound | verdict | seconds |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in args.only:
        kind, _, what = PERTURBATIONS[name]
        t0 = time.time()
        with perturbation(name):
            res = compare(FinetuneConfig(preset=args.preset, noise_runs=args.noise_runs))
        v = res["parity"]
        noise = "-" if v["noise"] is None else f"{100 * v['noise']:.2f}%"
        print(
            f"| {name}: {what} | {kind} | {100 * v['gap']:+.2f}% | {noise} | {100 * v['bound']:.2f}% | "
            f"{'pass' if v['within'] else 'FAIL'} | {time.time() - t0:.0f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
