"""The one-shot scenarios: first syncs, no-op, edits and a rename, each run from fresh folders."""

import os
import random

from .common import BenchFailure, SCENARIOS, TRASH, log, run_measured, run_step, tail
from .folders import edit_notes, rename_half, verify
from .tools import Context


def one_shot_run(tool, ctx, corpus, seed, run, upto=None, limit=None, expected=None):
    """The scenarios on fresh folders, all or the first up to `upto`; returns {scenario: measurement}. `limit`:
    seconds each step may take (BenchTimeout). `expected`, when given, is the dict of what A holds (`corpus` at
    first), kept up to date for the caller."""
    if expected is None:
        expected = dict(corpus)
    rng = random.Random(f"{seed}-{run}")
    results = {}

    checks_shared = tool.checks_shared and not ctx.s3  # a bucket is checked through A and B only

    def check(label, with_shared=False):
        folders = [("A", ctx.a, tool.exclude), ("B", ctx.b, tool.exclude)]
        if with_shared and checks_shared:
            folders.append(("shared", ctx.shared, ()))
        verify(f"{tool.name} run {run + 1} after {label}", expected, folders)

    def step(commands):
        before = ctx.counters()
        m = run_step(commands, ctx.log, limit)
        if before is not None:
            m.update(counters_delta(before, ctx.counters()))
        return m

    results["first_a"] = step(tool.first_a(ctx))
    if checks_shared:
        verify(f"{tool.name} run {run + 1} after first sync A", expected, [("shared", ctx.shared, ())])
    results["first_b"] = step(tool.first_b(ctx))
    check("first sync B", with_shared=True)
    results["noop"] = step(tool.sync(ctx, ctx.a))
    check("no-op sync")
    edit_notes(ctx, expected, 1, rng, f"run{run}-one")
    results["edit1"] = step(tool.sync(ctx, ctx.a) + tool.sync(ctx, ctx.b))
    check("1 edit")
    if upto == "edit1":
        return results
    edit_notes(ctx, expected, 100, rng, f"run{run}-hundred")
    results["edit100"] = step(tool.sync(ctx, ctx.a) + tool.sync(ctx, ctx.b))
    check("100 edits", with_shared=True)
    before_size, before_files = ctx.shared_usage()
    before_counters = ctx.counters()
    moved, folders = rename_half(ctx, expected)
    forced = 0

    def sync_side(side):
        # A tool whose safety check refuses the rename as a mass delete is run again as it says (rclone: --force);
        # both runs count, and the table says how many were refused.
        nonlocal forced
        commands = tool.sync(ctx, side)
        if len(commands) != 1 or not hasattr(tool, "forced_sync"):
            return run_step(commands, ctx.log)
        os.sync()
        refused = run_measured(commands[0][0], commands[0][1], ctx.log)
        if refused["rc"] == 0:
            return refused
        if "too many deletes" not in tail(ctx.log, 5):
            raise BenchFailure(f"`{' '.join(commands[0][0])}` exited {refused['rc']}\n{tail(ctx.log)}")
        forced += 1
        second = run_step(tool.forced_sync(ctx, side), ctx.log)
        return {"wall": refused["wall"] + second["wall"], "cpu": refused["cpu"] + second["cpu"],
                "rss": max(refused["rss"], second["rss"])}

    side_a = sync_side(ctx.a)
    side_b = sync_side(ctx.b)
    after_counters = ctx.counters()
    after_size, after_files = ctx.shared_usage()
    results["rename"] = {"wall": side_a["wall"] + side_b["wall"], "cpu": side_a["cpu"] + side_b["cpu"],
                         "rss": max(side_a["rss"], side_b["rss"]), "wall_a": side_a["wall"],
                         "wall_b": side_b["wall"], "shared_mb": (after_size - before_size) / 1e6,
                         "shared_files": after_files - before_files, "moved": moved, "folders": folders,
                         "refused": forced}
    if before_counters is not None:
        results["rename"].update(counters_delta(before_counters, after_counters))
    check(f"renaming {folders} folders of {moved} notes", with_shared=True)
    if tool.name.startswith("notesync"):
        trash = os.path.join(ctx.b, ".notesync", "trash")
        if os.path.exists(trash) and any(os.scandir(trash)):
            raise BenchFailure("notesync: the rename filled B's trash")
    # Every later sync of the folder: what a tool keeps of the moves it made (notesync: the moves' tombstones, and
    # the names each half of a move gives the other) it carries until they are gone.
    results["noop_renamed"] = step(tool.sync(ctx, ctx.a))
    check("a no-op sync after the rename")
    return results


def counters_delta(before, after):
    """What the S3 service did between two S3Service.counters: the requests, also by kind and status (the JSON's
    requests_by_kind), and its CPU seconds."""
    kinds = {k: n - before["requests"].get(k, 0) for k, n in sorted(after["requests"].items())
             if n != before["requests"].get(k, 0)}
    return {"requests": sum(kinds.values()), "requests_by_kind": kinds, "server_cpu": after["cpu"] - before["cpu"]}


def one_shot(tools, template, corpus, runs, work, seed, failures, label, s3=None):
    """`runs` runs of the scenarios for every tool, through a shared folder, or with `s3` (an S3Service) through
    a prefix of its bucket that is new for each tool and run (<tool>-<label>-run<N>)."""
    samples = {t.name: {s: [] for s, _ in SCENARIOS} for t in tools}
    for run in range(runs):
        order = tools[run % len(tools):] + tools[:run % len(tools)]  # no tool always goes first
        for tool in order:
            prefix = f"{tool.name}-{label}-run{run + 1}" if s3 else None
            ctx = Context.fresh(os.path.join(work, f"{label}-{tool.name}"), template, s3, tool, prefix)
            try:
                results = one_shot_run(tool, ctx, corpus, seed, run)
            except BenchFailure as error:
                failures.append(f"{label} {tool.name}: {error}")
                log(f"FAILED: {label} {tool.name} run {run + 1}: {error}")
                continue
            for scenario, m in results.items():
                samples[tool.name][scenario].append(m)
            log(f"  {label} run {run + 1}/{runs} {tool.name:8}: " + "  ".join(
                f"{s} {results[s]['wall']:.2f}s" for s, _ in SCENARIOS))
            TRASH.discard(ctx.root)
    return samples
