"""The huge section: one run at a million notes, Unison within a time limit, then notesync and its agents."""

import os

from .agent import agent_bench
from .common import BenchFailure, BenchTimeout, SCENARIOS, TRASH, log
from .folders import Sampled, make_corpus
from .oneshot import one_shot_run
from .report import agent_rows, one_shot_rows, summarize_samples
from .tools import Context


def huge_bench(args, tools, work, failures):
    """`--huge`: a million notes (nested folders, the same generator), one run. For notesync and, within
    --huge-unison-limit seconds per step, Unison: the first syncs of A and B, a no-op sync and one edit (A, then
    B). Then two notesync agents on the folders its one-shot run left: latency of --huge-agent-edits edits and
    the memory of each agent."""
    label = f"{args.huge_notes}"
    template, corpus = make_corpus(work, args.huge_notes, args.seed)
    Sampled.count, Sampled.edited = 2000, set()
    result = {"notes": args.huge_notes, "unfinished": {}, "corpus_bytes": sum(map(len, corpus.values()))}
    samples = {}
    agent_ctx = None
    # Unison first: notesync's folders stay for the agents, and two runs' folders at once need twice the space.
    for tool in sorted((t for t in tools if t.name in ("notesync", "unison")), key=lambda t: t.name != "unison"):
        ctx = Context.fresh(os.path.join(work, f"{label}-{tool.name}"), template)
        expected = dict(corpus)
        limit = args.huge_unison_limit if tool.name == "unison" else None
        log(f"  {label} {tool.name}: first syncs, no-op, one edit" + (f" (at most {limit:g} s a step)" if limit else ""))
        try:
            results = one_shot_run(tool, ctx, corpus, args.seed, 0, upto="edit1", limit=limit, expected=expected)
        except BenchTimeout as timeout:
            result["unfinished"][tool.name] = str(timeout)
            log(f"  {label} {tool.name}: {timeout}")
            TRASH.discard(ctx.root)
            continue
        except BenchFailure as error:
            failures.append(f"{label} {tool.name}: {error}")
            log(f"FAILED: {label} {tool.name}: {error}")
            continue
        samples[tool.name] = {scenario: [m] for scenario, m in results.items()}
        log(f"  {label} {tool.name}: " + "  ".join(f"{s} {m['wall']:.1f}s {m['rss']:.0f}MB" for s, m in results.items()))
        if tool.name == "notesync":
            agent_ctx, agent_expected = ctx, expected
        else:
            TRASH.discard(ctx.root)
    result["summary"] = summarize_samples(samples)
    if agent_ctx and not args.skip_agent:
        log(f"agent latency, {label} notes, {args.huge_agent_edits} edits")
        result["agent"] = agent_bench(args.notesync, template, agent_expected, work, args.seed, args.huge_agent_edits,
                                      args.agent_gap, args.idle_seconds, failures, synced=agent_ctx)
    if agent_ctx and os.path.exists(agent_ctx.root):  # agent_bench discards the folders it passed
        TRASH.discard(agent_ctx.root)
    Sampled.count = None
    TRASH.discard(template)
    return result


def huge_rows(huge, names, others, ntools):
    """The million-note rows: the one-shot scenarios it ran, what did not finish, and the agents."""
    prefix = f"{huge['notes']:,}: "
    rows = one_shot_rows(huge["summary"], names, others, prefix, lambda *_: "",
                         scenarios=[s for s in SCENARIOS if s[0] in ("first_a", "first_b", "noop", "edit1")])
    blank = [""] * (ntools - 1)
    for tool, why in huge["unfinished"].items():
        rows.append([f"{prefix}{tool}", "not finished", why] + blank + [""])
    if "agent" in huge:
        rows += agent_rows(huge["agent"], ntools, prefix, None, None, None)
    return rows
