"""The benchmark's flags (`scripts/bench --help`), and what --quick and the --only-* flags imply."""

import argparse
import os


def parse_args(description):
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notesync", default=os.environ.get("NOTESYNC_BIN"), help="the notesync binary")
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 runs, 2,000 notes, 50 agent edits, 10 s idle")
    parser.add_argument("--large", action="store_true", help="also 100,000 notes: the one-shot scenarios and the agents")
    parser.add_argument("--large-notes", type=int, default=100_000)
    parser.add_argument("--large-runs", type=int, help="runs at the large size (default: --runs)")
    parser.add_argument("--huge", action="store_true",
                        help="also 1,000,000 notes, one run: first syncs, no-op and one edit (notesync, and Unison"
                             " within --huge-unison-limit), then two agents; needs ~35 GB and 8M inodes free")
    parser.add_argument("--huge-notes", type=int, default=1_000_000)
    parser.add_argument("--huge-unison-limit", type=float, default=1800,
                        help="seconds each Unison step may take at the huge size before it is stopped and reported as"
                             " not finished (default 1800)")
    parser.add_argument("--huge-agent-edits", type=int, default=100, help="timed agent edits at the huge size")
    parser.add_argument("--tools", default="notesync,notesync-encrypted,unison,rclone",
                        help="comma-separated subset (notesync-encrypted: notesync on an encrypted server)")
    parser.add_argument("--agent-edits", type=int, default=200)
    parser.add_argument("--agent-gap", type=float, default=0.2, help="seconds between two agent edits")
    parser.add_argument("--idle-seconds", type=float, default=60)
    parser.add_argument("--skip-one-shot", action="store_true")
    parser.add_argument("--skip-agent", action="store_true")
    parser.add_argument("--skip-sshfs", action="store_true", help="leave out the agent's latency across sshfs")
    parser.add_argument("--served-runs", type=int, default=20,
                        help="runs of `diff` and `sync` answered by a running agent, at each corpus size")
    parser.add_argument("--only-sshfs", action="store_true",
                        help="only the agent's latency across sshfs (sshd on loopback, one sshfs mount)")
    parser.add_argument("--sshfs-edits", type=int, default=100, help="timed edits each way across sshfs")
    parser.add_argument("--sshfs-poll", type=float, default=0.25,
                        help="--poll-interval of the agent behind the sshfs mount, in seconds")
    parser.add_argument("--skip-s3", action="store_true",
                        help="leave out the S3 section (notesync and rclone bisync through SeaweedFS, agents)")
    parser.add_argument("--only-s3", action="store_true",
                        help="only the S3 section: one-shot syncs through a bucket against rclone, agents' latency")
    parser.add_argument("--s3-edits", type=int, default=100, help="timed edits each way between agents through S3")
    parser.add_argument("--s3-poll", type=float, default=0.25,
                        help="--poll-interval of both agents on the bucket, in seconds")
    parser.add_argument("--s3-venv", default=os.environ.get("NOTESYNC_S3_VENV"),
                        help="the virtual environment holding bin/weed (default: $NOTESYNC_S3_VENV)")
    parser.add_argument("--skip-server-life", action="store_true",
                        help="leave out the server over time (autosave hour, year of writing, gc on a big log)")
    parser.add_argument("--gc-scale-notes", type=int, default=100_000, help="notes of the big-log gc figure")
    parser.add_argument("--gc-scale-entries", type=int, default=1_000_000, help="log entries of the big-log gc figure")
    parser.add_argument("--skip-big-files", action="store_true",
                        help="leave out the big-file section (scripts/benchlib/big.py)")
    parser.add_argument("--only-big-files", action="store_true", help="only the big-file section")
    parser.add_argument("--big-notes", type=int, default=1_000, help="small notes beside the big file")
    parser.add_argument("--big-file-mb", type=int, default=2_048, help="the big file's size, MB")
    parser.add_argument("--merge-mb", type=int, default=36, help="the size of the note merged, MB")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", help="where the folders go (default: a new folder in $TMPDIR, removed after)")
    parser.add_argument("--json", default="bench-results.json", help="where the results go as JSON")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.notes, args.agent_edits, args.idle_seconds, args.sshfs_edits = 2, 2_000, 50, 10, 30
        args.s3_edits = 30
        args.gc_scale_notes, args.gc_scale_entries = 10_000, 20_000
    if args.only_sshfs and args.only_s3:
        parser.error("--only-sshfs and --only-s3 exclude each other")
    if args.only_big_files:
        args.skip_one_shot = args.skip_agent = args.skip_server_life = args.skip_s3 = args.skip_sshfs = True
        args.tools = "notesync"
    if args.only_sshfs or args.only_s3:
        args.skip_big_files = True
    if args.quick:
        args.big_file_mb, args.merge_mb, args.big_notes = 256, 8, 200
    if args.only_sshfs:
        args.skip_one_shot = args.skip_agent = args.skip_server_life = args.skip_s3 = True
        args.skip_sshfs = False
        args.tools = "notesync"
    # --skip-one-shot and --skip-agent apply within the S3 section too; --only-s3 leaves out the folder sections.
    if args.only_s3:
        args.skip_sshfs = args.skip_server_life = True
        args.skip_s3 = False
        args.tools = ",".join(n for n in args.tools.split(",") if n in ("notesync", "rclone")) or "notesync"
    if not args.notesync or not os.access(args.notesync, os.X_OK):
        parser.error("give the notesync binary with --notesync or NOTESYNC_BIN (scripts/bench does)")
    args.notesync = os.path.abspath(args.notesync)
    return args
