"""Command line: ``python -m fp8ref {formats,profile,diff,accept,finetune,bench}``.

Building the parser imports no training code; each command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable
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


def _check_output(path: str, what: str) -> str:
    """An output path that can be written (``atomic.check_writable``: its folder exists and takes
    files; none is created), as a usage error if not: asked before the work and before importing
    torch, so the error comes at once and names the user's path."""
    from .harness.profiles.atomic import UnwritablePath, check_writable

    try:
        check_writable(path, what)
    except UnwritablePath as exc:
        raise UsageError(str(exc)) from exc
    return path


def _cmd_profile(args: argparse.Namespace) -> int:
    if args.out:  # (before importing torch: a path that cannot be written is told at once)
        _check_output(args.out, "--out")
    from .harness.profiles.profile import collect
    from .harness.profiles.profile_file import save

    _check_device(args.device)
    claims = _claims_targets(args.claims)
    profile = collect(args.device, torchao=not args.no_torchao, claims=claims)
    if args.out:
        save(profile, args.out)
        print(f"wrote {args.out}: {len(profile['behaviour'])} keys, {profile['versions']}")
    else:
        print(json.dumps(profile, indent=1, sort_keys=True))
    from .harness.profiles.golden import not_measured_lines

    for line in not_measured_lines(profile):  # (said where a golden pinned from it would be read from)
        print(f"note: {line}; a golden pinned from this profile leaves them uncompared", file=sys.stderr)
    return 0


def _load_two(args: argparse.Namespace) -> tuple[dict, dict]:
    from .harness.profiles.profile_file import ProfileError, load

    try:
        return load(args.a), load(args.b)
    except ProfileError as exc:
        raise UsageError(str(exc)) from exc


def _same_device_kind(
    a: dict, b: dict, a_name: str, b_name: str, hint: str = " (--any-device compares them anyway)"
) -> None:
    """A usage error naming both device kinds when ``a`` and ``b`` were collected on different ones."""
    ka, kb = a["versions"].get("device"), b["versions"].get("device")
    if ka != kb:
        raise UsageError(
            f"{a_name} is a profile of device kind {ka!r} and {b_name} of {kb!r}: compare profiles of one device "
            f"kind{hint}"
        )


def _cmd_diff(args: argparse.Namespace) -> int:
    from .harness.profiles.profile_file import (
        ProfileError,
        accepted_differences_file,
        diff,
        first_divergence,
        not_compared,
        read_accepted,
        same_value,
        who,
    )

    a, b = _load_two(args)
    if not args.any_device:
        _same_device_kind(a, b, args.a, args.b)
    rows = diff(a, b)
    try:  # the differences accepted for B's install beside A (A-installs.json), if any
        accepted = read_accepted(accepted_differences_file(args.a), b)
    except ProfileError as exc:
        raise UsageError(str(exc)) from exc
    named = accepted[0] if accepted is not None else {}
    open_rows = [(k, x, y) for k, x, y in rows if not (k in named and same_value(k, named[k], y))]
    # (known before printing: a reader that closes the pipe early still gets this exit code)
    args.exit_code = 1 if (open_rows if args.accepted_ok else rows) else 0
    if args.format != "text":
        from .harness.profiles import upgrade_report

        report = upgrade_report.build(a, b, a_name=args.a, b_name=args.b, accepted=accepted)
        render = {
            "json": upgrade_report.render_json,
            "markdown": upgrade_report.render_markdown,
            "summary": upgrade_report.render_summary,
        }[args.format]
        sys.stdout.write(render(report))
        return int(args.exit_code)
    print(f"A: {args.a} ({who(a, b)}, {a['versions'].get('device')})")
    print(f"B: {args.b} ({who(b, a)}, {b['versions'].get('device')})")
    for why, keys in not_compared(a, b).items():
        print(f"not compared: {len(keys)} keys ({why})")
    if not rows:
        print(f"equal: {len(a['behaviour'])} keys")
        return 0
    width = max(len(k) for k, _, _ in rows)
    print(f"{'key'.ljust(width)}  A -> B")
    for k, x, y in rows:
        mark = "  (accepted)" if (k, x, y) not in open_rows else ""
        print(f"{k.ljust(width)}  {x!r} -> {y!r}{mark}")
        where = first_divergence(k, a, b)
        if where:
            print(f"{''.ljust(width)}  first divergence: {where}")
    total = len(set(a["behaviour"]) | set(b["behaviour"]))
    done = f"; {len(rows) - len(open_rows)} accepted ({accepted[1]})" if accepted and len(open_rows) < len(rows) else ""
    print(f"{len(rows)} of {total} keys differ{done}")
    return int(args.exit_code)


def _cmd_accept(args: argparse.Namespace) -> int:
    """Name B's differences from the golden A (all, or those ``--key`` matches), with why, in
    A-installs.json (whole or not at all); differences accepted before for the install stay, each
    with its own reason (``reasons``; ``why`` joins them), but those B no longer has."""
    import fnmatch

    from .harness.profiles.profile_file import (
        ProfileError,
        accepted_differences_file,
        diff,
        install_label,
        read_accepted_file,
        write_accepted_file,
    )

    why = " ".join(args.why.split())
    if not why:
        raise UsageError("--why: expected the reason these differences are accepted, got nothing")
    a, b = _load_two(args)  # (inputs first: a golden that is not there is the error to name)
    path = accepted_differences_file(args.a)
    _check_output(str(path), "accept")
    _same_device_kind(a, b, args.a, args.b, hint="")
    rows = diff(a, b)
    if args.key:
        unmatched = [pattern for pattern in args.key if not any(fnmatch.fnmatchcase(k, pattern) for k, _, _ in rows)]
        if unmatched:
            raise UsageError(f"--key {unmatched[0]!r}: matches none of the {len(rows)} differing keys")
        rows = [(k, x, y) for k, x, y in rows if any(fnmatch.fnmatchcase(k, pattern) for pattern in args.key)]
    try:
        named = read_accepted_file(path) if path.exists() else {}
    except ProfileError as exc:
        raise UsageError(str(exc)) from exc
    label = install_label(b)
    before = named.get(label, {})
    # differences accepted before that are gone (the value now is the golden's again): the golden
    # test fails on them ("a named one that is gone"), so accepting this profile drops them
    gone = sorted(
        k
        for k in before.get("differences", {})
        if a["behaviour"].get(k) == b["behaviour"].get(k)
        and (not args.key or any(fnmatch.fnmatchcase(k, pattern) for pattern in args.key))
    )
    if not rows and not gone:
        print(f"{args.b} ({label}) does not differ from {args.a}: nothing to accept")
        return 0
    earlier = before.get("reasons") or {k: before["why"] for k in before.get("differences", {}) if before.get("why")}
    replaced = sorted({earlier[k] for k, _, _ in rows if k in earlier and earlier[k] != why})
    if replaced and not _confirm_replacing("; ".join(replaced), args.replace):
        raise UsageError(
            f"{path} already accepts some of these keys for {label} because: {'; '.join(map(repr, replaced))}; "
            "--replace gives them this reason instead"
        )
    differences = {**before.get("differences", {}), **{k: new for k, _, new in rows}}
    reasons = {**earlier, **{k: why for k, _, _ in rows}}
    for k in gone:
        differences.pop(k, None), reasons.pop(k, None)
    if differences:
        named[label] = {
            "why": " | ".join(dict.fromkeys(reasons[k] for k in sorted(differences))),
            "differences": dict(sorted(differences.items())),
            "reasons": dict(sorted(reasons.items())),
        }
    else:
        named.pop(label, None)
    dropped = f"; {len(gone)} no longer differing, dropped: {', '.join(gone)}" if gone else ""
    n = len(rows)
    if write_accepted_file(path, named):
        print(f"wrote {path}: {n} difference{'s' * (n != 1)} accepted for {label} ({len(differences)} in all){dropped}")
    else:  # (nothing left to name for any install: the file went)
        print(f"removed {path}: nothing left to accept for any install{dropped}")
    return 0


def _confirm_replacing(earlier: str, replace: bool) -> bool:
    """Whether to replace an earlier reason: ``--replace``, or yes at a terminal's prompt."""
    if replace:
        return True
    if not sys.stdin.isatty():
        return False
    answer = input(f"replace the earlier reason {earlier!r}? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


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
    prefix = args.out or f"finetune-{args.preset if args.model is None else 'model'}-{args.backend}-{args.recipe}"
    _check_output(prefix + ".json", "--out")  # (before importing torch: a bad path fails at once, named)
    if not args.no_plot:
        _check_output(prefix + ".png", "--out")
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
    # progress bars only on a terminal: a log or a CI step's captured stderr gets none (one line
    # per update, kilobytes a run), and a run that succeeds prints nothing there
    bars = _Bars() if not args.no_progress and sys.stderr.isatty() else None
    try:
        results = compare(cfg, progress=bars)
    except (ResourceUnavailable, MissingPackage) as exc:  # what the user asked for cannot be had here
        raise UsageError(str(exc)) from exc
    finally:
        if bars is not None:
            bars.close()
    args.exit_code = 1 if args.check and not results["parity"]["within"] else 0  # (kept if stdout closes)
    for line in summary_lines(results):
        print(line)
    print(f"wrote {save_results(results, prefix + '.json')}")
    if not args.no_plot:
        print(f"wrote {plot_losses(results, prefix + '.png')}")
    return int(args.exit_code)


EXIT_CODES = """exit codes: 0 done; 1 a difference found (diff: the profiles differ; finetune --check:
FP8 outside the parity bound); 2 a usage or input error (one 'error:' line; --debug for the
traceback); 3 an internal error in fp8ref (a bug: the traceback is printed); 130 interrupted
(nothing written)"""


def _trace_target(target: str) -> Any:
    """The function ``pkg.module:function`` names (``trace.target.load_target``); a usage error
    naming what is wrong with it otherwise."""
    from .harness.trace.target import TargetError, load_target

    try:
        return load_target(target)
    except TargetError as exc:
        raise UsageError(_target_error(target, exc)) from exc


def _target_error(target: str, exc: Exception) -> str:
    """``exc`` (a ``TargetError``) as one line: for a module that raised while it loaded, what it
    raised and the file:line it came from (``--debug`` prints the whole traceback)."""
    cause = exc.__cause__
    if not getattr(exc, "inside", False) or cause is None:
        return str(exc)
    module = target.partition(":")[0]
    if isinstance(cause, SyntaxError) and cause.msg:  # (str() would add the file's name alone)
        said = cause.msg
    else:
        said = " ".join(str(cause).split())  # (one line, whatever the message's own lines)
    what = f"{type(cause).__name__}: {said}" if said else type(cause).__name__
    where = _where_it_failed(cause, module)
    return f"target {target!r}: module {module!r} cannot be imported ({what}{f', at {where}' if where else ''})"


def _where_it_failed(exc: BaseException, module: str) -> str | None:
    """``file:line`` where importing ``module`` failed: a SyntaxError's own place (a file's, not
    the ``<string>`` of a compile the module ran), else the innermost frame of the target's
    package (its top-level name, so a helper module of its own counts and a library it called
    does not); None when no frame of it is there."""
    if isinstance(exc, SyntaxError) and exc.filename and not exc.filename.startswith("<") and exc.lineno:
        return f"{_shown(exc.filename)}:{exc.lineno}"
    top = module.split(".")[0]
    place = None
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_globals.get("__name__", "")
        if name == top or name.startswith(top + "."):
            place = f"{_shown(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return place


def _shown(filename: str) -> str:
    """``filename`` relative to the current folder when it is under it (as the user named the
    target from there), else as it is."""
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # (another drive, on Windows)
        return filename
    return filename if relative.startswith(os.pardir) else relative


def _users_call(target: str, call: Callable[[], Any]) -> Any:
    """``call()``, which runs the function ``target`` names: what it raises in the user's code is
    a usage error naming the target (its traceback printed, theirs to read); what it raises in
    fp8ref's own is a bug (exit 3)."""
    try:
        return call()
    except Exception as exc:
        if not _the_users_error(exc):
            raise  # (fp8ref's own: a bug, exit 3)
        traceback.print_exc()  # (the user's function failed: its traceback is theirs to read)
        raise UsageError(f"target {target!r} raised {type(exc).__name__}: {exc}") from exc


def _the_users_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the user's function's to answer for: raised in the user's code (or a
    library it called), or fp8ref's refusal of a bad argument (a ValueError or TypeError) where
    the user's code called fp8ref itself. Raised in fp8ref's code that the user's code reached
    through torch (the tracer's mode), or with fp8ref's frames innermost otherwise, it is a bug."""
    ours = os.path.dirname(os.path.realpath(__file__)) + os.sep
    stack = traceback.extract_tb(exc.__traceback__)
    outside = [i for i, f in enumerate(stack) if not os.path.realpath(f.filename).startswith(ours)]
    if not outside:  # (fp8ref's frames alone: none of the user's code)
        return False
    if outside[-1] == len(stack) - 1:  # (innermost outside fp8ref: the user's code, or its libraries)
        return True
    called = stack[outside[-1] + 1].name  # (the fp8ref function the innermost outside frame reached)
    through_torch = called in ("__torch_dispatch__", "__torch_function__")  # (the tracer's mode: no call of theirs)
    return not through_torch and isinstance(exc, (ValueError, TypeError))


def _claims_targets(targets: list[str]) -> tuple[str, ...]:
    """``--claims`` targets, each run once now (its results kept for the profile): one that is not
    there, or returns no list of results, is a usage error naming it."""
    from .harness.claims.targets import claim_results
    from .harness.trace.target import TargetError

    for target in targets:
        try:
            _users_call(target, functools.partial(claim_results, target))
        except TargetError as exc:
            raise UsageError(f"--claims: {_target_error(target, exc)}") from exc
    return tuple(targets)


def _cmd_trace(args: argparse.Namespace) -> int:
    from .harness.trace import trace

    fn = _trace_target(args.target)
    result = _users_call(args.target, lambda: trace(fn))
    checked = sum(record.status != "unchecked" for record in result.records)
    args.exit_code = 1 if result.violations or not checked else 0
    print(f"{args.target}: {len(result.records)} FP8 op call(s), {len(result.violations)} violation(s)")
    if not checked:  # (a pass would claim what was not checked)
        print(f"{args.target}: nothing was checked (no FP8 op call the tracer judges)")
    for line in result.summary():
        print(f"  {line}")
    if args.all:
        for record in result.records:
            print(record.line())
    for record in result.violations:
        print(f"violation: {record.report()}")
    return int(args.exit_code)


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
    p.add_argument(
        "--claims",
        action="append",
        default=[],
        metavar="pkg.module:function",
        help="add the results of a team's claims (the function returns them: fp8ref.harness.claims), one key per "
        "case; repeatable",
    )
    p.set_defaults(func=_cmd_profile)

    p = sub.add_parser("diff", help="compare two profiles: one line per differing key, or a report; exit 1 if any")
    p.add_argument("a", help="profile JSON (e.g. the golden)")
    p.add_argument("b", help="profile JSON (e.g. this install)")
    p.add_argument(
        "--format",
        choices=["text", "markdown", "summary", "json"],
        default="text",
        help="text: one line per key (default); markdown: the upgrade report, grouped by family with each "
        "key's meaning, consequence for training and severity; summary: its counts and most serious rows, "
        "always under 60,000 characters (a pull-request comment); json: the report as data. Differences "
        "accepted in A-installs.json beside A are marked with their reason",
    )
    p.add_argument(
        "--accepted-ok",
        action="store_true",
        help="exit 0 when every difference is accepted in A-installs.json (exit 1 only for the others)",
    )
    p.add_argument(
        "--any-device", action="store_true", help="compare profiles of two device kinds (else a usage error)"
    )
    p.set_defaults(func=_cmd_diff)

    p = sub.add_parser(
        "accept", help="accept B's differences from the golden A on purpose: write them, with why, to A-installs.json"
    )
    p.add_argument("a", help="the golden profile JSON (NAME.json; writes NAME-installs.json beside it)")
    p.add_argument("b", help="the profile of the install whose differences are accepted")
    p.add_argument("--why", required=True, help="why these differences are acceptable (kept with them)")
    p.add_argument(
        "--key",
        action="append",
        metavar="PATTERN",
        help="accept only the differing keys this glob matches (repeatable; e.g. 'transformers.fp8.*'); the others "
        "keep failing",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="give keys accepted before with another reason this one (else asked at a terminal, refused elsewhere)",
    )
    p.set_defaults(func=_cmd_accept)

    p = sub.add_parser("finetune", help="train one causal LM in bf16 and in FP8; the loss parity verdict, JSON + PNG")
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
    p.add_argument(
        "--check", action="store_true", help="exit 1 when FP8's gap is outside the parity bound (budget + 3 x noise)"
    )
    p.add_argument(
        "--out", help="output prefix: writes PREFIX.json and PREFIX.png (default finetune-<preset>-<backend>-<recipe>)"
    )
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.add_argument(
        "--no-progress", action="store_true", help="no progress bars (they show only when stderr is a terminal)"
    )
    p.set_defaults(func=_cmd_finetune)

    p = sub.add_parser("bench", help="throughput benchmarks")
    p.add_argument("what", choices=["codec"], help="codec: the codec's encode vs torch's native cast")
    p.add_argument("--n", type=int, default=1 << 24, help="elements (default 16M)")
    p.add_argument("--repeat", type=int, default=5, help="timed repetitions; the best counts")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser(
        "trace",
        help="run a function under the tracer: its FP8 ops, each checked against the definition; exit 1 on a "
        "violation or when nothing was checked",
    )
    p.add_argument("target", help="pkg.module:function, imported as python -m imports (the current folder first)")
    p.add_argument("--all", action="store_true", help="also print every recorded call, in order")
    p.set_defaults(func=_cmd_trace)

    try:
        args = parser.parse_args(argv)  # a usage error exits 2 here, with argparse's message
    except SystemExit:  # (--help printed: a reader that left must not turn its exit 0 into 120)
        _flush_stdout()
        raise
    if not args.verbose:
        for name in _IMPORT_NOISE:
            logging.getLogger(name).setLevel(logging.ERROR)
    try:
        args.exit_code = args.func(args)
        sys.stdout.flush()  # a reader that left shows here, not in the interpreter's last flush
        return int(args.exit_code)
    except BrokenPipeError:  # stdout's reader left (`| head -1`): quietly, with the command's exit code
        _stdout_to_devnull()
        return int(getattr(args, "exit_code", 0))
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


def _stdout_to_devnull() -> None:
    """Python's recipe for a reader that closed the pipe (docs.python.org/3/library/signal.html,
    "Note on SIGPIPE"): stdout's file descriptor points at devnull, so the interpreter's last flush
    of what is still buffered does not fail again. A command whose exit code depends on its result
    sets ``args.exit_code`` before it prints, so that code survives a reader that left early."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # a stdout without a file descriptor (captured) has no pipe to close
        pass


def _flush_stdout() -> None:
    """Flush stdout now, quietly if its reader has left."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_to_devnull()


def _error(args: argparse.Namespace, message: str) -> int:
    if args.debug:
        traceback.print_exc()
    print(f"error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
