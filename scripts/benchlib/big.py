"""The benchmark's big-file section (scripts/bench --only-big-files; part of every full run unless
--skip-big-files): what one big file among ordinary notes costs notesync in memory, and what a merge of a big note
costs.

1. A notes folder of --big-notes small notes (1,000) and one file of --big-file-mb MB (2,048; random bytes, so
   neither compression nor sparseness helps): the first sync of A (init, sync), the first sync of B, and an agent
   on A while the big file is rewritten and a small note edited (its peak resident memory, VmHWM), each with the
   folder's default max-file-size and again with no limit (`notesync config --max-file-size 0`). Each row says
   whether the big file reached B (left out is what the default limit does with it) and that every small note did.
2. A note of --merge-mb MB (36) of short lines, synced to A and B, then edited at its start on A and at its end on
   B: B's sync merges the two edits three ways. With the limit raised above the note (`--max-file-size 64M`).

Peak RSS of one-shot commands comes from GNU time (`%M`) as in common.py; the agent's from /proc/PID/status.
Standard library only.
"""

import os
import random
import shutil
import signal
import subprocess
import tempfile
import time


def _measured(argv, log):
    """Runs argv under GNU time: (exit code, wall seconds, peak RSS MB)."""
    with tempfile.NamedTemporaryFile("r", prefix="bench-rss-") as rss, open(log, "ab") as out:
        out.write(("$ " + " ".join(argv) + "\n").encode())
        out.flush()
        start = time.perf_counter()
        rc = subprocess.call(["/usr/bin/time", "-q", "-f", "%M", "-o", rss.name] + argv, stdin=subprocess.DEVNULL,
                             stdout=out, stderr=out)
        wall = time.perf_counter() - start
        lines = rss.read().strip().splitlines()
    return rc, wall, (int(lines[-1]) / 1024.0 if lines and lines[-1].isdigit() else float("nan"))


def _step(commands, log, failures, label):
    """Runs commands as one step: wall seconds added, the largest peak RSS; a failing command is a failure."""
    wall, rss = 0.0, 0.0
    for argv in commands:
        rc, took, peak = _measured(argv, log)
        wall, rss = wall + took, max(rss, peak)
        if rc != 0:
            failures.append(f"{label}: `{' '.join(argv)}` exited {rc} (log {log})")
    return {"wall": wall, "rss": rss}


def _write_random(path, size, seed):
    """`size` bytes of pseudo-random data, written in 8 MiB pieces (never held whole)."""
    rng = random.Random(seed)
    piece = 8 << 20
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(piece, left)
            f.write(rng.randbytes(n))
            left -= n


def _same_file(a, b):
    if not os.path.exists(b) or os.path.getsize(a) != os.path.getsize(b):
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(8 << 20), fb.read(8 << 20)
            if x != y:
                return False
            if not x:
                return True


def _vm_hwm_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def _wait_for(path, data, timeout):
    """Whether `path` holds `data`, looked at once and then every 50 ms until `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path, "rb") as f:
                if f.read() == data:
                    return True
        except OSError:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _big_file_run(binary, root, notes, big_mb, limit, seed, failures):
    """One run of scenario 1; `limit`: the max-file-size to set, or None for the folder's default."""
    label = f"big file ({'max-file-size ' + limit if limit else 'default limit'})"
    os.makedirs(root)
    a, b, server, log = (os.path.join(root, n) for n in ("A", "B", "server", "commands.log"))
    os.makedirs(a)
    small = {}
    for i in range(notes):
        rel = f"notes/{i // 100:02d}/n{i:04d}.md"
        small[rel] = f"# note {i}\n\n".encode() + b"some words of a note\n" * (20 + i % 40)
        os.makedirs(os.path.dirname(os.path.join(a, rel)), exist_ok=True)
        with open(os.path.join(a, rel), "wb") as f:
            f.write(small[rel])
    big = os.path.join(a, "video.bin")
    _write_random(big, big_mb << 20, seed)
    settings = [[binary, "config", "--notes", a, "--max-file-size", limit]] if limit else []
    result = {"limit": limit or "default"}
    result["first_a"] = _step(
        [[binary, "init", "--notes", a, "--server", server, "--create-server", "--device-name", "a"]] + settings
        + [[binary, "sync", "--notes", a, "--quiet"]], log, failures, label + ", first sync A")
    settings_b = [[binary, "config", "--notes", b, "--max-file-size", limit]] if limit else []
    result["first_b"] = _step(
        [[binary, "init", "--notes", b, "--server", server, "--device-name", "b"]] + settings_b
        + [[binary, "sync", "--notes", b, "--quiet"]], log, failures, label + ", first sync B")
    missing = [rel for rel, data in small.items() if not _wait_for(os.path.join(b, rel), data, 0)]
    if missing:
        failures.append(f"{label}: {len(missing)} small notes did not reach B (e.g. {missing[0]})")
    result["big_arrived"] = _same_file(big, os.path.join(b, "video.bin"))
    result["small_arrived"] = not missing
    # The agent on A: the big file rewritten, then a small note edited; its peak memory once B has the edit.
    out = open(os.path.join(root, "agent-A.log"), "ab")
    agent = subprocess.Popen([binary, "watch", "--notes", a], stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        time.sleep(3)
        with open(big, "r+b") as f:
            f.seek(0)
            f.write(b"rewritten at the start")
        edited = next(iter(small))
        data = small[edited] + b"edited under the agent\n"
        with open(os.path.join(a, edited), "wb") as f:
            f.write(data)
        deadline = time.monotonic() + 600
        arrived = False
        while time.monotonic() < deadline and not arrived:
            _step([[binary, "sync", "--notes", b, "--quiet"]], log, failures, label + ", sync B under the agent")
            arrived = _wait_for(os.path.join(b, edited), data, 0)
            if not arrived:
                time.sleep(1)
        if not arrived:
            failures.append(f"{label}: the agent's edit of {edited} did not reach B within 600 s")
        result["agent_rss"] = _vm_hwm_mb(agent.pid)
    finally:
        agent.send_signal(signal.SIGTERM)
        try:
            agent.wait(60)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
    shutil.rmtree(root, ignore_errors=True)
    return result


def _merge_run(binary, root, merge_mb, failures):
    label = "merge of a big note"
    os.makedirs(root)
    a, b, server, log = (os.path.join(root, n) for n in ("A", "B", "server", "commands.log"))
    os.makedirs(a)
    line = b"a line of a long note, the same shape as a log or a journal\n"
    lines = [b"%08d " % i + line for i in range(((merge_mb << 20) // (len(line) + 9)))]
    text = b"".join(lines)
    note = "journal.md"
    with open(os.path.join(a, note), "wb") as f:
        f.write(text)
    limit = f"{max(64, 2 * merge_mb)}M"
    _step([[binary, "init", "--notes", a, "--server", server, "--create-server", "--device-name", "a"],
           [binary, "config", "--notes", a, "--max-file-size", limit], [binary, "sync", "--notes", a, "--quiet"],
           [binary, "init", "--notes", b, "--server", server, "--device-name", "b"],
           [binary, "config", "--notes", b, "--max-file-size", limit], [binary, "sync", "--notes", b, "--quiet"]],
          log, failures, label + ", set-up")
    with open(os.path.join(a, note), "wb") as f:
        f.write(b"edited on A\n" + text)
    with open(os.path.join(b, note), "wb") as f:
        f.write(text + b"edited on B\n")
    _step([[binary, "sync", "--notes", a, "--quiet"]], log, failures, label + ", sync A")
    result = _step([[binary, "sync", "--notes", b, "--quiet"]], log, failures, label + ", merging sync B")
    merged = b"edited on A\n" + text + b"edited on B\n"
    with open(os.path.join(b, note), "rb") as f:
        result["merged"] = f.read() == merged
    if not result["merged"]:
        copies = [n for n in os.listdir(b) if n.startswith("journal") and n != note]
        result["kept_as_copy"] = bool(copies)
        if not copies:
            failures.append(f"{label}: B holds neither the merge nor a conflict copy")
    result["note_mb"] = len(text) / (1 << 20)
    shutil.rmtree(root, ignore_errors=True)
    return result


def big_bench(binary, work, notes, big_mb, merge_mb, seed, failures):
    results = {"notes": notes, "big_mb": big_mb, "merge_mb": merge_mb, "runs": []}
    for limit in (None, "0"):
        results["runs"].append(_big_file_run(binary, os.path.join(work, f"big-{limit or 'default'}"), notes, big_mb,
                                             limit, seed, failures))
    results["merge"] = _merge_run(binary, os.path.join(work, "big-merge"), merge_mb, failures)
    return results


def big_rows(big, ntools):
    blank = [""] * (ntools - 1)
    rows = []
    size = f"{big['big_mb'] / 1024:g} GB" if big["big_mb"] >= 1024 else f"{big['big_mb']} MB"
    title = f"{size} file among {big['notes']:,} notes"
    for run in big["runs"]:
        where = "arrived on B" if run["big_arrived"] else "left out, listed"
        limit = "default max-file-size" if run["limit"] == "default" else "no max-file-size"
        rows += [
            [title, f"{limit}: first sync A, peak RSS MB", f"{run['first_a']['rss']:.0f} ({run['first_a']['wall']:.1f} s)"]
            + blank + [""],
            ["", f"{limit}: first sync B, peak RSS MB", f"{run['first_b']['rss']:.0f} ({where})"] + blank + [""],
            ["", f"{limit}: agent on A, file rewritten, peak RSS MB", f"{run['agent_rss']:.0f}"] + blank + [""],
        ]
        title = ""
    merge = big["merge"]
    outcome = "merged" if merge["merged"] else ("kept as a conflict copy" if merge.get("kept_as_copy") else "LOST")
    rows.append([f"merge of a {merge['note_mb']:.0f} MB note", "merging sync, peak RSS MB",
                 f"{merge['rss']:.0f} ({merge['wall']:.1f} s, {outcome})"] + blank + [""])
    return rows
