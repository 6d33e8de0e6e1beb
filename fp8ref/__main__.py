"""Command line: ``python -m fp8ref {formats,bench}``."""

from __future__ import annotations

import argparse
import json
import sys

import torch


def _cmd_formats(args: argparse.Namespace) -> int:
    from .formats import FORMATS, formats_table

    if args.json:
        print(json.dumps([f.describe() for f in FORMATS.values()], indent=2))
    else:
        print(formats_table())
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from .bench import codec_throughput

    rows = codec_throughput(n=args.n, repeat=args.repeat, device=args.device)
    if args.json:
        print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "rows": rows}, indent=2))
        return 0
    print(f"codec encode vs native cast, {args.n:,} float32 on {args.device} "
          f"(torch {torch.__version__}, {torch.get_num_threads()} threads), best of {args.repeat}")
    print(f"{'format':10s} {'native ms':>10s} {'codec ms':>10s} {'codec/native throughput':>24s}")
    for r in rows:
        print(f"{r['format']:10s} {r['native_s'] * 1e3:10.1f} {r['codec_s'] * 1e3:10.1f} {r['ratio']:23.2f}x")
    return 0


def main(argv: "list[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fp8ref", description="fp8ref: FP8 reference and checks")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("formats", help="print the derived format table")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")
    p.set_defaults(func=_cmd_formats)

    p = sub.add_parser("bench", help="throughput benchmarks")
    p.add_argument("what", choices=["codec"], help="codec: the codec's encode vs torch's native cast")
    p.add_argument("--n", type=int, default=1 << 24, help="elements (default 16M)")
    p.add_argument("--repeat", type=int, default=5, help="timed repetitions; the best counts")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")
    p.set_defaults(func=_cmd_bench)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
