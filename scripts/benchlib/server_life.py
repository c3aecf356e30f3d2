"""The server over time: an autosave hour, a year of writing, and gc on a big log (`notesync-load history-load`)."""

import json
import os
import re
import subprocess
import time

from .common import TRASH
from .report import mark


def load_binary(binary):
    """The load generator `notesync-load`, built beside `notesync` (scripts/bench builds both)."""
    path = os.path.join(os.path.dirname(binary), "notesync-load")
    if not os.access(path, os.X_OK):
        raise SystemExit(f"bench: {path} is missing; build it beside {binary} "
                         "(`swift build -c release --product notesync-load`), or let scripts/bench build both")
    return path


def history_load(binary, server, scenario, logfile, *extra):
    """One `notesync-load history-load` run on a new server: its JSON figures."""
    subprocess.run([binary, "server", "init", server], check=True, stdout=subprocess.DEVNULL)
    with open(logfile, "a") as err:
        out = subprocess.run([load_binary(binary), "history-load", "--server", server, "--scenario", scenario, *extra],
                             check=True, stdout=subprocess.PIPE, stderr=err, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def timed_fsck(binary, server, logfile):
    """The wall time of `notesync server fsck` on `server`, which must find it clean."""
    started = time.monotonic()
    with open(logfile, "a") as err:
        subprocess.run([binary, "server", "fsck", server], check=True, stdout=err, stderr=err)
    return time.monotonic() - started


def server_life_bench(binary, work, seed, scale_notes, scale_entries, failures):
    """The server over time, written in simulated time (nobody waits an hour or a year): an hour of autosave as
    format 2 kept it (every save a full copy) and as format 3 with the agent's pace, compression and gc; a year of
    daily writing with gc every night; gc on a big log, and `server fsck` after it; `server fsck` while gc's marks
    wait for their grace (the whole log there, gc's snapshot at its end)."""
    out = {}
    logfile = os.path.join(work, "server-life.log")
    try:
        today = os.path.join(work, "life-format2")
        subprocess.run([binary, "server", "init", today], check=True, stdout=subprocess.DEVNULL)
        marker = os.path.join(today, "notesync-server.json")
        with open(marker) as f:
            text = f.read()
        with open(marker, "w") as f:
            f.write(re.sub(r'"format" : [35]', '"format" : 2', text))
        with open(logfile, "a") as err:
            raw = subprocess.run([load_binary(binary), "history-load", "--server", today, "--scenario", "autosave",
                                  "--pace", "0", "--seed", str(seed)],
                                 check=True, stdout=subprocess.PIPE, stderr=err, text=True).stdout
        out["autosave_today"] = json.loads(raw.strip().splitlines()[-1])
        TRASH.discard(today)
        server = os.path.join(work, "life-autosave")
        out["autosave"] = history_load(binary, server, "autosave", logfile, "--seed", str(seed))
        TRASH.discard(server)
        server = os.path.join(work, "life-year")
        out["year"] = history_load(binary, server, "year", logfile, "--seed", str(seed))
        TRASH.discard(server)
        server = os.path.join(work, "life-scale")
        out["scale"] = history_load(binary, server, "scale", logfile, "--seed", str(seed), "--notes",
                                    str(scale_notes), "--entries", str(scale_entries))
        out["scale"]["fsckSeconds"] = timed_fsck(binary, server, logfile)
        TRASH.discard(server)
        # fsck while gc's marks wait for their grace (a week): the log is all there, and the snapshot gc published
        # at its end is compared with the log folded to it.
        server = os.path.join(work, "life-marked")
        marked_notes, marked_entries = min(scale_notes, 10_000), min(scale_entries, 20_000)
        out["marked"] = history_load(binary, server, "scale", logfile, "--seed", str(seed), "--notes",
                                     str(marked_notes), "--entries", str(marked_entries), "--grace", "604800")
        out["marked"]["fsckSeconds"] = timed_fsck(binary, server, logfile)
        TRASH.discard(server)
    except (subprocess.CalledProcessError, OSError, ValueError) as error:
        failures.append(f"server over time: {error} (see {logfile})")
    return out


def server_life_rows(life, ntools):
    blank = [""] * (ntools - 1)
    rows = []
    today, auto = life.get("autosave_today"), life.get("autosave")
    if today and auto:
        base = today["before"]["bytes"]

        def cell(usage):
            return f"{usage['bytes'] / 1e6:.2f} MB, {usage['files']:,} files"

        title = (f"server: 1 h of autosave ({auto['saves']:,} saves of a {auto['noteBytes'] / 1e3:.0f} KB note, "
                 f"one every 0.5 s)")
        rows += [
            [title, "format 2, every save kept", cell(today["before"])] + blank + [""],
            ["", f"format 3, paced ({auto['commits']} commits)", cell(auto["before"])] + blank + [""],
            ["", "after gc, default policy", cell(auto["afterDefault"])] + blank
            + [f"≤5 % of format 2 {mark(auto['afterDefault']['bytes'] <= 0.05 * base)} "
               f"({100 * auto['afterDefault']['bytes'] / base:.1f} %)"],
            ["", "after gc --all 0", cell(auto["afterAll0"])] + blank + [""],
            ["", "after gc a day later", cell(auto["afterDefaultNextDay"])] + blank + [""],
        ]
    year = life.get("year")
    if year:
        for index, point in enumerate(year["checkpoints"]):
            ok = point["ratio"] < 3
            rows.append([f"server: a year of daily writing, gc nightly ({year['commits']:,} commits)" if index == 0
                         else "", f"day {point['day']}: server / live text",
                         f"{point['bytes'] / 1e6:.2f} MB / {point['liveTextBytes'] / 1e6:.2f} MB = "
                         f"{point['ratio']:.2f}"] + blank + [f"<3 {mark(ok)}" if point["day"] == 365 else ""])
        rows.append(["", "slowest nightly gc s", f"{year['gcSecondsMax']:.2f}"] + blank + [""])
    scale = life.get("scale")
    if scale:
        rows += [
            [f"server: gc of {scale['notes']:,} notes and {scale['entries']:,} log entries", "wall s",
             f"{scale['gcSeconds']:.1f}"] + blank + [""],
            ["", "peak RSS MB", f"{scale['peakResidentMB']:.0f}"] + blank + [""],
            ["", "server before → after", f"{scale['before']['bytes'] / 1e6:.0f} MB, {scale['before']['files']:,} files"
             f" → {scale['after']['bytes'] / 1e6:.0f} MB, {scale['after']['files']:,} files"] + blank + [""],
        ]
        if "fsckSeconds" in scale:
            rows.append(["", "server fsck after it, wall s", f"{scale['fsckSeconds']:.1f}"] + blank + [""])
    marked = life.get("marked")
    if marked and "fsckSeconds" in marked:
        rows.append([f"server: fsck of {marked['notes']:,} notes and {marked['entries']:,} entries, gc's marks "
                     "in their grace (the snapshot at the log's end)", "wall s", f"{marked['fsckSeconds']:.1f}"]
                    + blank + [""])
    if not rows:
        rows.append(["server over time", "(failed or skipped)", "—"] + blank + [""])
    return rows
