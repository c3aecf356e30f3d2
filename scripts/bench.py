#!/usr/bin/env python3
"""notesync's benchmark: one-shot syncs against Unison and rclone bisync, and the agent's latency.

Run through scripts/bench, which installs Unison, rclone, sshfs and openssh-server, SeaweedFS (in a virtual
environment, see need_s3_venv in scripts/lib.sh) and builds notesync (release) first:

    scripts/bench                 # 10,000 notes, 5 runs of every one-shot scenario, agent latency, S3
    scripts/bench --quick         # smoke test: 2,000 notes, 2 runs, 50 agent edits, 10 s idle, 30 sshfs/S3 edits
    scripts/bench --large         # also 100,000 notes: one-shot (notesync and Unison), and the two agents
    scripts/bench --huge --skip-one-shot --skip-sshfs --skip-s3 --skip-server-life --workdir BIG
                                  # also 1,000,000 notes, one run (see below); BIG: ~35 GB and 8M inodes free
    scripts/bench --only-sshfs --notes 1000    # only the agent's latency across sshfs
    scripts/bench --only-s3       # only the S3 section (--skip-s3 leaves it out)

The agent's latency across sshfs: an sshd on 127.0.0.1 with its own keys and config in the run's folder, the
server folder mounted through sshfs; agent A on the folder itself, agent B on the mount polling every
--sshfs-poll seconds (0.25 by default). Edits on A are timed until B holds the bytes, then edits on B until A
does; they are spaced by --agent-gap plus a random part of the poll interval, so that they fall at random
moments of B's poll cycle. Skipped, with the reason printed, where FUSE cannot be mounted.

The S3 section: SeaweedFS (`weed server -s3`) on 127.0.0.1, on free ports, with one SigV4 identity and one
bucket, started for the section and stopped after it (also on a failure, Ctrl-C or SIGTERM); it may take a
minute before it takes writes, and the benchmark waits for that. Then the one-shot scenarios again, notesync
(`--server s3://BUCKET/PREFIX --endpoint URL`, keys in AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) against rclone
bisync (the remote `s3:` configured by RCLONE_CONFIG_S3_* only, the folder scenario's flags) on the same bucket,
each tool and run under a prefix of its own; A and B are verified after every scenario, the bucket is not read
back. Each step also counts the S3 requests SeaweedFS answered (its Prometheus counter; a HEAD counts as a GET)
and the CPU time SeaweedFS spent, on the same cores as the tool. Targets at 10,000
notes: notesync's wall time at most half of rclone's for the first sync, the no-op and one edit. Then two agents
on A and B polling the bucket every --s3-poll seconds (0.25 by default): --s3-edits edits A->B and B->A timed
as across sshfs, and the requests and CPU of the two agents left idle for --idle-seconds. --skip-one-shot and
--skip-agent apply here too. Where SeaweedFS is missing or does not start, the reason is printed and the section
skipped (not a failure).

The huge section (`--huge`, --huge-notes 1,000,000 by default): one run on the same generator's nested folders.
Unison first, each of its steps stopped after --huge-unison-limit seconds (then reported as not finished), then
notesync: the first syncs of A and B, a no-op sync and one edit, with the time, CPU and peak memory of each; then
two notesync agents on the folders its run left, --huge-agent-edits edits timed A -> B, and the memory of each
agent, idle and at its peak. No targets are set at this size; it must fit the machine's memory.

The big-file section (scripts/benchlib/big.py; --only-big-files, --skip-big-files): the peak memory of notesync's
first syncs and of an agent with one --big-file-mb MB file (2,048) among --big-notes notes (1,000), with the default
max-file-size and with none, and of a sync that merges a --merge-mb MB note (36).

Every tool syncs device folder A and device folder B through a shared folder (for notesync, the server).
`notesync-encrypted` is notesync on an encrypted server (`--encrypt`, docs/encryption.md), timed side by side with
plain notesync in the folder scenarios: target at 10,000 notes, its first sync at most 1.2 × plain.
Each run starts from fresh folders holding the same deterministic corpus (scripts/gen-corpus.py). After every
scenario A and B must hold exactly the expected files and bytes; a tool that did not sync is reported as a
failure (and the exit code is 1). Prints one table and writes it as JSON (bench-results.json by default).
The parts live in scripts/benchlib/ (tools, services, scenarios, report); this file runs them in order.
Standard library only.
"""

import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchlib import big  # noqa: E402 (after the path is set)
from benchlib.agent import agent_bench, served_bench  # noqa: E402
from benchlib.common import TRASH, gen_corpus, log  # noqa: E402
from benchlib.folders import make_corpus  # noqa: E402
from benchlib.huge import huge_bench  # noqa: E402
from benchlib.oneshot import one_shot  # noqa: E402
from benchlib.options import parse_args  # noqa: E402
from benchlib.report import machine_info, summarize_samples  # noqa: E402
from benchlib.s3 import S3Service, s3_bench  # noqa: E402
from benchlib.server_life import server_life_bench  # noqa: E402
from benchlib.sshfs import sshfs_bench  # noqa: E402
from benchlib.table import print_report  # noqa: E402
from benchlib.tools import NoteSync, NoteSyncEncrypted, Rclone, Unison  # noqa: E402


def main():
    args = parse_args(__doc__)

    available = {"notesync": NoteSync(args.notesync), "notesync-encrypted": NoteSyncEncrypted(args.notesync),
                 "unison": Unison(), "rclone": Rclone()}
    tools = [available[n] for n in args.tools.split(",")]
    names = [t.name for t in tools]
    info = machine_info()
    info["versions"] = {t.name: t.version() for t in tools}
    measure_s3 = not args.skip_s3 and "notesync" in names
    if measure_s3:
        info["versions"]["seaweedfs"] = S3Service(args.s3_venv or "", "").version()
    work = args.workdir or tempfile.mkdtemp(prefix="notesync-bench-")
    TRASH.open(work)
    os.makedirs(work, exist_ok=True)
    failures = []
    results = {"machine": info, "config": {k: v for k, v in vars(args).items() if k not in ("json",)},
               "failures": failures}
    started = time.perf_counter()

    results["corpora"] = []

    def corpus_info(template, corpus, runs):
        results["corpora"].append({"notes": len(corpus), "bytes": sum(map(len, corpus.values())), "runs": runs,
                                   "digest": gen_corpus.tree_digest(template)})

    folder_sections = not args.only_s3  # --only-s3 leaves out the folder sections
    folder_one_shot = not args.skip_one_shot and folder_sections
    measure_agent = not args.skip_agent and folder_sections and "notesync" in names
    measure_sshfs = not args.skip_sshfs and "notesync" in names
    needs_corpus = folder_one_shot or measure_agent or measure_sshfs or measure_s3
    if needs_corpus:
        template, corpus = make_corpus(work, args.notes, args.seed)
        corpus_info(template, corpus, None if args.skip_one_shot else args.runs)
    if folder_one_shot:
        log(f"one-shot syncs, {args.notes} notes, {args.runs} runs: {', '.join(names)}")
        samples = one_shot(tools, template, corpus, args.runs, work, args.seed, failures, f"{args.notes}")
        results["one_shot"] = {"notes": args.notes, "summary": summarize_samples(samples), "samples": samples}
    if measure_agent:
        log(f"agent latency, {args.notes} notes, {args.agent_edits} edits")
        results["agent"] = agent_bench(args.notesync, template, corpus, work, args.seed, args.agent_edits,
                                       args.agent_gap, args.idle_seconds, failures)
    if measure_agent:
        log(f"agent-served diff and sync, {args.notes} notes, {args.served_runs} runs")
        results["served"] = served_bench(args.notesync, template, corpus, work, args.served_runs, failures)
    if measure_sshfs:
        log(f"agent latency across sshfs, {args.notes} notes, {args.sshfs_edits} edits each way, "
            f"polling every {args.sshfs_poll} s")
        results["sshfs"] = sshfs_bench(args.notesync, template, corpus, work, args.seed, args.sshfs_edits,
                                       args.agent_gap, args.sshfs_poll, failures)
    if measure_s3:
        log(f"S3 section, {args.notes} notes: SeaweedFS on loopback, notesync against rclone bisync, two agents")
        results["s3"] = s3_bench(args, tools, template, corpus, work, failures)
    if needs_corpus:
        TRASH.discard(template)
        corpus = None
    if args.large:
        large_tools = [t for t in tools if t.name in ("notesync", "unison")]
        ltemplate, lcorpus = make_corpus(work, args.large_notes, args.seed)
        runs = args.large_runs or args.runs
        corpus_info(ltemplate, lcorpus, runs)
        log(f"one-shot syncs, {args.large_notes} notes, {runs} runs: {', '.join(t.name for t in large_tools)}")
        lsamples = one_shot(large_tools, ltemplate, lcorpus, runs, work, args.seed, failures,
                            f"{args.large_notes}")
        results["large"] = {"notes": args.large_notes, "summary": summarize_samples(lsamples), "samples": lsamples}
        if "notesync" in names and not args.skip_agent:
            log(f"agent latency, {args.large_notes} notes, {args.agent_edits} edits")
            results["large_agent"] = agent_bench(args.notesync, ltemplate, lcorpus, work, args.seed, args.agent_edits,
                                                 args.agent_gap, args.idle_seconds, failures)
            log(f"agent-served diff and sync, {args.large_notes} notes, {args.served_runs} runs")
            results["large_served"] = served_bench(args.notesync, ltemplate, lcorpus, work, args.served_runs, failures)
        TRASH.discard(ltemplate)
    if args.huge:
        log(f"huge: {args.huge_notes:,} notes, one run")
        huge = results["huge"] = huge_bench(args, tools, work, failures)
        # No tree digest here: it would read the million notes once more (huge_bench has discarded them by now).
        results["corpora"].append({"notes": huge["notes"], "bytes": huge["corpus_bytes"], "runs": 1})
    if not args.skip_server_life and "notesync" in names:
        log(f"server over time: autosave hour, year of writing, gc on {args.gc_scale_notes:,} notes and "
            f"{args.gc_scale_entries:,} entries")
        results["server_life"] = server_life_bench(args.notesync, work, args.seed, args.gc_scale_notes,
                                                   args.gc_scale_entries, failures)
    if not args.skip_big_files and "notesync" in names:
        log(f"big files: a {args.big_file_mb:,} MB file among {args.big_notes:,} notes; a merge of a "
            f"{args.merge_mb} MB note")
        results["big"] = big.big_bench(args.notesync, work, args.big_notes, args.big_file_mb, args.merge_mb,
                                             args.seed, failures)
    results["seconds"] = time.perf_counter() - started
    info["loadavg_end"] = os.getloadavg()

    print_report(results, args, names, info)
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1, ensure_ascii=False)
    print(f"results written to {args.json} ({results['seconds']:.0f} s in all)")
    if not args.workdir and not failures:
        shutil.rmtree(work, ignore_errors=True)
    elif not failures:
        TRASH.empty(settle=False)
    if failures:
        print(f"logs kept in {work}", file=sys.stderr)
        print(f"\n{len(failures)} FAILURE(S):", file=sys.stderr)
        for failure in failures:
            print(f"  FAILED: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
