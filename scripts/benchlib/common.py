"""What every part of the benchmark shares: its failures, its log, the finished runs' trash, and running a
command measured (wall time, CPU, peak RSS)."""

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time


SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("gen_corpus", os.path.join(SCRIPTS, "gen-corpus.py"))
gen_corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_corpus)

SCENARIOS = [
    ("first_a", "1 first sync A ↔ shared"),
    ("first_b", "2 first sync B"),
    ("noop", "3 no-op sync A"),
    ("edit1", "4 1 edit: sync A, then B"),
    ("edit100", "5 100 edits: sync A, then B"),
    ("rename", "6 folders of half the notes renamed: sync A, then B"),
    ("noop_renamed", "7 no-op sync A after the rename"),
]


METRICS = [("wall", "wall s"), ("cpu", "CPU s"), ("rss", "peak RSS MB")]


# Measured for the rename only: what the rename added to the shared folder (bytes, files), and the time of each side.
RENAME_METRICS = [("wall_a", "sync A s"), ("wall_b", "sync B s"), ("shared_mb", "shared +MB"),
                  ("shared_files", "shared +files"), ("refused", "refused as mass delete")]


# Measured through a bucket only: the requests the service answered during the step (SeaweedFS's own count), and
# the CPU time SeaweedFS spent (on the same cores as the tool).
S3_METRICS = [("requests", "S3 requests"), ("server_cpu", "SeaweedFS CPU s")]


class BenchFailure(Exception):
    pass


class BenchTimeout(BenchFailure):
    """A step stopped at its time limit (`--huge-unison-limit`): reported as not finished, not as a failure."""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Trash:
    """Finished runs' folders, deleted at the end instead of at once.

    On ext4 without a journal (the build machine's root filesystem) the inode allocator passes over every inode
    freed in the last 60 s (6 min while its inode table block is dirty), scanning past it: deleting a run's
    300,000 files just before the next tool's measured first sync made that sync twice as slow, all of it kernel
    time (find_inode_bit, recently_deleted), for whichever tool came next. A user's sync never follows such a
    delete. When space or inodes run short, the trash is emptied and the benchmark waits 65 s before measuring
    again."""

    def __init__(self):
        self.root, self.count = None, 0

    def open(self, work):
        """Makes the trash in `work`, the run's folder: called once, before anything is discarded."""
        self.root = os.path.join(work, "trash")
        os.makedirs(self.root, exist_ok=True)

    def discard(self, path):
        self.count += 1
        os.rename(path, os.path.join(self.root, str(self.count)))
        fs = os.statvfs(self.root)
        if fs.f_bavail * fs.f_frsize < 12 << 30 or fs.f_favail < 3_500_000:  # a million notes use 3.2M inodes a run
            self.empty(settle=True)

    def empty(self, settle):
        if not os.listdir(self.root):
            return
        shutil.rmtree(self.root)
        os.makedirs(self.root)
        if settle:
            os.sync()
            log("  (emptied the trash to make room; waiting 65 s so that freed inodes do not slow the next run)")
            time.sleep(65)


TRASH = Trash()  # opened by main()


def run_measured(argv, env=None, logfile=None, limit=None):
    """Runs argv to completion: wall time, user+sys CPU (os.wait4's rusage, which includes the reaped child) and
    peak RSS. The RSS comes from GNU time, the child's parent: a child forked straight from this Python process
    would inherit its memory high-water mark (Linux keeps ru_maxrss across exec), inflating every figure.
    With `limit` (seconds), a command still running then is killed with its process group: BenchTimeout."""
    with tempfile.NamedTemporaryFile("r", prefix="bench-rss-") as rss, open(logfile or os.devnull, "ab") as out:
        if logfile:
            out.write(("$ " + " ".join(argv) + "\n").encode())
            out.flush()
        start = time.perf_counter()
        proc = subprocess.Popen(["/usr/bin/time", "-q", "-f", "%M", "-o", rss.name] + argv, env=env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=limit is not None)
        fired = threading.Event()

        def stop():
            fired.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:  # it ended just then: still reported as stopped, the limit was reached
                pass

        timer = threading.Timer(limit, stop) if limit is not None else None
        if timer:
            timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if timer:
            timer.cancel()
        if fired.is_set():
            raise BenchTimeout(f"`{os.path.basename(argv[0])}` did not finish within {limit:.0f} s (stopped)")
        proc.returncode = os.waitstatus_to_exitcode(status)
        text = rss.read().strip().splitlines()
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "rss": int(text[-1]) / 1024.0 if text and text[-1].isdigit() else float("nan"), "rc": proc.returncode}


def run_step(commands, logfile, limit=None):
    """Runs commands one after the other as one measured step: wall and CPU add up, RSS is the largest. `limit`:
    seconds for the whole step (BenchTimeout)."""
    total = {"wall": 0.0, "cpu": 0.0, "rss": 0.0}
    for argv, env in commands:
        os.sync()  # nobody else's dirty pages get flushed inside the measured command
        m = run_measured(argv, env, logfile, None if limit is None else max(1.0, limit - total["wall"]))
        if m["rc"] != 0:
            raise BenchFailure(f"`{' '.join(argv)}` exited {m['rc']}\n{tail(logfile)}")
        total["wall"] += m["wall"]
        total["cpu"] += m["cpu"]
        total["rss"] = max(total["rss"], m["rss"])
    return total


def tail(path, lines=15):
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


def without_aws(environ):
    """The environment without AWS_*: no profile, session token or CA bundle of the user's reaches a tool talking
    to the benchmark's own service (rclone's AWS SDK even refuses to start with AWS_CA_BUNDLE set)."""
    return {k: v for k, v in environ.items() if not k.startswith("AWS_")}


def capture(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError as error:
        return f"unavailable ({error})"
