"""Command line: ``python -m fp8ref {formats,profile,diff,accept,finetune,bench}``.

Building the parser imports no training code; each command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback
from typing import Any

# Loggers that print at import time (torchao's optional native kernels it cannot load on this
# machine; torch's pytree deprecation notes triggered by torchao), and torch's C++ extension
# helper, which on a CUDA build without a CUDA runtime warns "No CUDA runtime is found" when
# torch.compile first builds a CPU kernel (finetune --compile): shown only with --verbose.
_IMPORT_NOISE = ("torchao", "torch.utils._pytree", "torch.utils.cpp_extension")


def _cmd_formats(args: argparse.Namespace) -> int:
    from .reference.formats import FORMATS, formats_table

    if args.json:
        print(json.dumps([f.describe() for f in FORMATS.values()], indent=2))
    else:
        print(formats_table())
    return 0


class UsageError(Exception):
    """What the user asked for cannot be done (bad input, a missing file, no such device): one
    ``error:`` line and exit code 2."""


def _check_device(device: str) -> str:
    """A device this machine has (``install.device_kind``'s checks), as a usage error if not."""
    from .harness.stack.install import device_kind

    try:
        device_kind(device)
    except ValueError as exc:
        raise UsageError(f"--{exc}") from exc
    return device


def _cmd_profile(args: argparse.Namespace) -> int:
    from .harness.profiles.profile import collect
    from .harness.profiles.profile_file import save

    _check_device(args.device)
    profile = collect(args.device, torchao=not args.no_torchao)
    if args.out:
        save(profile, args.out)
        print(f"wrote {args.out}: {len(profile['behaviour'])} keys, {profile['versions']}")
    else:
        print(json.dumps(profile, indent=1, sort_keys=True))
    return 0


def _load_two(args: argparse.Namespace) -> tuple[dict, dict]:
    from .harness.profiles.profile_file import ProfileError, load

    try:
        return load(args.a), load(args.b)
    except ProfileError as exc:
        raise UsageError(str(exc)) from exc


def _cmd_diff(args: argparse.Namespace) -> int:
    from .harness.profiles.profile_file import ProfileError, diff, named_beside, read_named, who

    a, b = _load_two(args)
    rows = diff(a, b)
    if args.format != "text":
        from .harness.profiles import upgrade_report

        try:  # the differences accepted for B's install beside A (A-installs.json), if any
            accepted = read_named(named_beside(args.a), b)
        except ProfileError as exc:
            raise UsageError(str(exc)) from exc
        report = upgrade_report.build(a, b, a_name=args.a, b_name=args.b, accepted=accepted)
        render = upgrade_report.render_json if args.format == "json" else upgrade_report.render_markdown
        sys.stdout.write(render(report))
        return 1 if rows else 0
    print(f"A: {args.a} ({who(a)}, {a['versions'].get('device')})")
    print(f"B: {args.b} ({who(b)}, {b['versions'].get('device')})")
    if not rows:
        print(f"equal: {len(a['behaviour'])} keys")
        return 0
    width = max(len(k) for k, _, _ in rows)
    print(f"{'key'.ljust(width)}  A -> B")
    for k, x, y in rows:
        print(f"{k.ljust(width)}  {x!r} -> {y!r}")
    print(f"{len(rows)} of {len(set(a['behaviour']) | set(b['behaviour']))} keys differ")
    return 1


def _cmd_accept(args: argparse.Namespace) -> int:
    """Name B's differences from the golden A, with why, in A-installs.json (whole or not at all)."""
    from .harness.profiles.atomic import write_text
    from .harness.profiles.profile_file import ProfileError, diff, install_label, named_beside, read_named_file

    why = " ".join(args.why.split())
    if not why:
        raise UsageError("--why: expected the reason these differences are accepted, got nothing")
    a, b = _load_two(args)
    rows = diff(a, b)
    path = named_beside(args.a)
    try:
        named = read_named_file(path) if path.exists() else {}
    except ProfileError as exc:
        raise UsageError(str(exc)) from exc
    label = install_label(b)
    if not rows:
        print(f"{args.b} ({label}) does not differ from {args.a}: nothing to accept")
        return 0
    named[label] = {"why": why, "differences": {k: new for k, _, new in rows}}
    write_text(path, json.dumps(named, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path}: {len(rows)} differences accepted for {label}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from .harness.speed.bench import codec_throughput

    _check_device(args.device)
    if args.n < 1 or args.repeat < 1:
        raise UsageError(f"--n and --repeat: expected positive integers, got {args.n} and {args.repeat}")
    import torch

    rows = codec_throughput(n=args.n, repeat=args.repeat, device=args.device)
    if args.json:
        print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "rows": rows}, indent=2))
        return 0
    print(
        f"codec encode vs native cast, {args.n:,} float32 on {args.device} "
        f"(torch {torch.__version__}, {torch.get_num_threads()} threads), best of {args.repeat}"
    )
    print(f"{'format':10s} {'native ms':>10s} {'codec ms':>10s} {'codec/native throughput':>24s}")
    for r in rows:
        print(f"{r['format']:10s} {r['native_s'] * 1e3:10.1f} {r['codec_s'] * 1e3:10.1f} {r['ratio']:23.2f}x")
    return 0


class _Bars:
    """One progress bar per run (tqdm when installed, a line every tenth of the run otherwise)."""

    def __init__(self) -> None:
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None
        self.tqdm = tqdm
        self.bar: Any = None
        self.label: str | None = None

    def __call__(self, label: str, step: int, steps: int, loss: float, tps: float | None) -> None:
        rate = f"{tps:,.0f} tok/s" if tps else "warm-up"
        if self.tqdm is None:
            if step == steps or step % max(1, steps // 10) == 0:
                print(f"{label}: step {step}/{steps} loss {loss:.4f} {rate}", file=sys.stderr, flush=True)
            return
        if label != self.label:
            self.close()
            self.bar, self.label = self.tqdm(total=steps, desc=f"{label:5s}", unit="step", leave=True), label
        self.bar.set_postfix_str(f"loss {loss:.4f}, {rate}", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _cmd_finetune(args: argparse.Namespace) -> int:
    from .finetune import FinetuneConfig, compare, plot_losses, save_results, summary_lines
    from .finetune.config import ResourceUnavailable
    from .harness.stack.install import MissingPackage

    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    cfg = FinetuneConfig(
        preset=args.preset,
        model=args.model,
        dataset=args.dataset,
        recipe=args.recipe,
        backend=args.backend,
        steps=args.steps,
        seq_len=args.seq_len,
        batch=args.batch,
        lr=args.lr,
        layers=args.layers,
        compile=args.compile,
        grad_checkpointing=args.grad_checkpointing,
        seed=args.seed,
        device=args.device,
        noise_runs=args.noise_runs,
        fp8_budget=args.fp8_budget,
        emulate=args.emulate,
    )
    _check_device(args.device)
    try:
        cfg.resolved()  # a bad option is the user's input: one line, exit 2
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    bars = _Bars() if not args.no_progress else None
    try:
        results = compare(cfg, progress=bars)
    except (ResourceUnavailable, MissingPackage) as exc:  # what the user asked for cannot be had here
        raise UsageError(str(exc)) from exc
    finally:
        if bars is not None:
            bars.close()
    prefix = args.out or f"finetune-{args.preset if args.model is None else 'model'}-{args.backend}-{args.recipe}"
    for line in summary_lines(results):
        print(line)
    print(f"wrote {save_results(results, prefix + '.json')}")
    if not args.no_plot:
        print(f"wrote {plot_losses(results, prefix + '.png')}")
    return 1 if args.check and not results["parity"]["within"] else 0


EXIT_CODES = """exit codes: 0 done; 1 a difference found (diff: the profiles differ; finetune --check:
FP8 outside the parity bound); 2 a usage or input error (one 'error:' line; --debug for the
traceback); 3 an internal error in fp8ref (a bug: the traceback is printed); 130 interrupted
(nothing written)"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fp8ref",
        description="fp8ref: FP8 reference and checks",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also show what torch and torchao log while importing (missing optional kernels, deprecations)",
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (exit codes unchanged)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("formats", help="print the derived format table")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")
    p.set_defaults(func=_cmd_formats)

    p = sub.add_parser("profile", help="collect this install's FP8 behaviour profile (JSON)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--out", help="write the profile here instead of printing it")
    p.add_argument("--no-torchao", action="store_true", help="skip the torchao probes")
    p.set_defaults(func=_cmd_profile)

    p = sub.add_parser("diff", help="compare two profiles: one line per differing key, or a report; exit 1 if any")
    p.add_argument("a", help="profile JSON (e.g. the golden)")
    p.add_argument("b", help="profile JSON (e.g. this install)")
    p.add_argument(
        "--format",
        choices=["text", "markdown", "json"],
        default="text",
        help="text: one line per key (default); markdown: the upgrade report, grouped by family with each "
        "key's meaning, consequence for training and severity (a pull-request comment as it is); json: the same "
        "report as data. Differences accepted in A-installs.json beside A are marked with their reason",
    )
    p.set_defaults(func=_cmd_diff)

    p = sub.add_parser(
        "accept", help="accept B's differences from the golden A on purpose: write them, with why, to A-installs.json"
    )
    p.add_argument("a", help="the golden profile JSON (NAME.json; writes NAME-installs.json beside it)")
    p.add_argument("b", help="the profile of the install whose differences are accepted")
    p.add_argument("--why", required=True, help="why these differences are acceptable (kept with them)")
    p.set_defaults(func=_cmd_accept)

    p = sub.add_parser("finetune", help="train one causal LM in bf16 and in FP8; speedup, loss gap, JSON + PNG")
    from .finetune.presets import PRESETS

    p.add_argument(
        "--preset",
        default="tiny",
        choices=list(PRESETS),
        help="model shape and defaults (tiny: ~0.43M params, sized for a CPU; default tiny)",
    )
    p.add_argument("--model", help="opt-in: a pretrained causal LM (hub id or directory) instead of the preset")
    p.add_argument(
        "--dataset",
        default="grammar",
        help="grammar (embedded, default), wikitext (opt-in download) or a local .txt/.json/.jsonl/.csv/.parquet",
    )
    p.add_argument(
        "--backend",
        default="torchao",
        choices=["torchao", "fp8ref"],
        help="FP8 from torchao convert_to_float8_training or fp8ref's emulated Fp8Linear",
    )
    p.add_argument(
        "--recipe",
        default="tensorwise",
        help="torchao: tensorwise, rowwise, rowwise_with_gw_hp; fp8ref: any fp8ref recipe",
    )
    p.add_argument("--steps", type=int, help="training steps (default: the preset's)")
    p.add_argument("--seq-len", type=int, help="tokens per row (default: the preset's)")
    p.add_argument("--batch", type=int, help="rows per step (default: the preset's)")
    p.add_argument("--lr", type=float, help="peak learning rate (default: the preset's; 1e-5 with --model)")
    p.add_argument("--layers", type=int, help="decoder layers of the preset model")
    p.add_argument("--compile", action="store_true", help="torch.compile both models (compile time excluded)")
    p.add_argument("--grad-checkpointing", action="store_true", help="activation checkpointing in both runs")
    p.add_argument("--seed", type=int, default=0, help="init and data seed (default 0)")
    p.add_argument("--device", help="torch device (default: cuda when available, else cpu)")
    p.add_argument(
        "--noise-runs",
        type=int,
        default=2,
        help="extra bf16 runs from one-ulp-nudged weights: the noise floor FP8's gap is judged "
        "against (default 2; 0: judge by the budget alone)",
    )
    p.add_argument(
        "--fp8-budget",
        type=float,
        help="the loss gap FP8 itself may cost, as a fraction (default: the preset's; 0.01 with --model)",
    )
    p.add_argument(
        "--emulate",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torchao: FP8 GEMMs as float32 matmuls of the cast values instead of torch._scaled_mm "
        "(default: on for CPU, off for CUDA)",
    )
    p.add_argument("--check", action="store_true", help="exit 1 when FP8's gap is outside the parity bound")
    p.add_argument(
        "--out", help="output prefix: writes PREFIX.json and PREFIX.png (default finetune-<preset>-<backend>-<recipe>)"
    )
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_finetune)

    p = sub.add_parser("bench", help="throughput benchmarks")
    p.add_argument("what", choices=["codec"], help="codec: the codec's encode vs torch's native cast")
    p.add_argument("--n", type=int, default=1 << 24, help="elements (default 16M)")
    p.add_argument("--repeat", type=int, default=5, help="timed repetitions; the best counts")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")
    p.set_defaults(func=_cmd_bench)

    args = parser.parse_args(argv)  # a usage error exits 2 here, with argparse's message
    if not args.verbose:
        for name in _IMPORT_NOISE:
            logging.getLogger(name).setLevel(logging.ERROR)
    try:
        return args.func(args)
    except UsageError as exc:
        return _error(args, str(exc))
    except OSError as exc:  # an output that cannot be written, an input that cannot be read
        where = f" ({exc.filename})" if exc.filename else ""
        return _error(args, f"{exc.strerror or exc}{where}")
    except KeyboardInterrupt:
        print("interrupted: nothing was written", file=sys.stderr)
        return 130
    except Exception:  # noqa: BLE001 - a bug: say so, show where, keep 1 and 2 meaningful
        traceback.print_exc()
        print("error: internal error in fp8ref (a bug; the traceback is above)", file=sys.stderr)
        return 3


def _error(args: argparse.Namespace, message: str) -> int:
    if args.debug:
        traceback.print_exc()
    print(f"error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
