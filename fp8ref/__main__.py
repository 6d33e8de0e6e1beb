"""Command line: ``python -m fp8ref {formats,profile,diff,bench}``."""

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


def _cmd_profile(args: argparse.Namespace) -> int:
    from .profile import collect, save

    profile = collect(args.device, torchao=not args.no_torchao)
    if args.out:
        save(profile, args.out)
        print(f"wrote {args.out}: {len(profile['behaviour'])} keys, {profile['versions']}")
    else:
        print(json.dumps(profile, indent=1, sort_keys=True))
    return 0


def _cmd_diff(args: argparse.Namespace) -> int:
    from .profile import diff, load

    a, b = load(args.a), load(args.b)
    rows = diff(a, b)
    va, vb = a["versions"], b["versions"]
    print(f"A: {args.a} (torch {va.get('torch')}, torchao {va.get('torchao')}, {va.get('device')})")
    print(f"B: {args.b} (torch {vb.get('torch')}, torchao {vb.get('torchao')}, {vb.get('device')})")
    if not rows:
        print(f"equal: {len(a['behaviour'])} keys")
        return 0
    width = max(len(k) for k, _, _ in rows)
    print(f"{'key'.ljust(width)}  A -> B")
    for k, x, y in rows:
        print(f"{k.ljust(width)}  {x!r} -> {y!r}")
    print(f"{len(rows)} of {len(set(a['behaviour']) | set(b['behaviour']))} keys differ")
    return 1


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

    p = sub.add_parser("profile", help="collect this install's FP8 behaviour profile (JSON)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--out", help="write the profile here instead of printing it")
    p.add_argument("--no-torchao", action="store_true", help="skip the torchao probes")
    p.set_defaults(func=_cmd_profile)

    p = sub.add_parser("diff", help="compare two profiles: one line per differing key; exit 1 if any")
    p.add_argument("a", help="profile JSON (e.g. the golden)")
    p.add_argument("b", help="profile JSON (e.g. this install)")
    p.set_defaults(func=_cmd_diff)

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
