"""The agent: edits timed from one folder to the other, idle cost, and `diff` and `sync` answered by a running
agent."""

import os
import random
import signal
import statistics
import subprocess
import time

from .common import BenchFailure, TRASH, log, run_step, tail
from .folders import Sampled, edited_bytes, verify, write_in_place
from .report import mark, percentile
from .tools import Context, NoteSync


def proc_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)


def proc_status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def wait_for_bytes(path, data, timeout):
    """Polls `path` (stat, then read when it changed) every ~1 ms until it holds `data`; the seconds it took."""
    start = time.perf_counter()
    last = None
    while True:
        try:
            st = os.stat(path)
            key = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            if key != last:
                last = key
                with open(path, "rb") as f:
                    if f.read() == data:
                        return time.perf_counter() - start
        except FileNotFoundError:
            last = None
        if time.perf_counter() - start > timeout:
            return None
        time.sleep(0.001)


def time_edits(source, target, paths, expected, rng, gap, label, result, failures, timeout=10, jitter=0.0):
    """Edits each of `paths` in `source` in place, one at a time, and times until `target` holds the new bytes:
    adds lost edits to result["lost"] and the percentiles (ms) to `result`. Between two edits it waits `gap`
    seconds plus a random part of `jitter`: against a polling agent, a fixed pause would fall at the same moment
    of every poll cycle and measure that moment only."""
    latencies = []
    for i, rel in enumerate(paths):
        data = edited_bytes(expected[rel], rng, f"{label}{i}")
        Sampled.edited.add(rel)
        expected[rel] = data
        start = time.perf_counter()
        write_in_place(os.path.join(source, rel), data)
        took = wait_for_bytes(os.path.join(target, rel), data, timeout)
        if took is None:
            result["lost"] = result.get("lost", 0) + 1
            failures.append(f"{label}: edit {i + 1} of {rel} did not arrive within {timeout} s")
            log(f"FAILED: {label} edit {i + 1} of {rel} did not arrive within {timeout} s")
        else:
            latencies.append(time.perf_counter() - start)
        time.sleep(gap + (rng.uniform(0, jitter) if jitter else 0))
    if latencies:
        ms = sorted(x * 1000 for x in latencies)
        result.update(p50=percentile(ms, 50), p95=percentile(ms, 95), p99=percentile(ms, 99), max=ms[-1],
                      samples_ms=[round(x * 1000, 2) for x in latencies])
    return latencies


def stop_agents(agents, label, failures):
    """SIGTERM to every agent; each must exit 0 within 30 s."""
    for agent in agents:
        if agent.poll() is None:
            agent.send_signal(signal.SIGTERM)
    for agent in agents:
        try:
            rc = agent.wait(30)
            if rc != 0:
                failures.append(f"{label}: SIGTERM ended it with exit code {rc}")
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
            failures.append(f"{label}: did not exit within 30 s of SIGTERM")


def start_agents(binary, ctx, sides, env=None):
    """Starts `notesync watch` on each (folder, extra arguments), logging to agent-<folder>.log in the run's folder."""
    agents = []
    for side, extra in sides:
        out = open(os.path.join(ctx.root, f"agent-{os.path.basename(side)}.log"), "ab")
        agents.append(subprocess.Popen([binary, "watch", "--notes", side] + extra, stdin=subprocess.DEVNULL,
                                       stdout=out, stderr=out, env=env))
    return agents


def warm_up(ctx, paths, expected, rng, label, logname):
    """Edits `paths` on A and waits for each on B: the agents are up and have scanned before anything is timed."""
    for i, rel in enumerate(paths):
        Sampled.edited.add(rel)
        expected[rel] = edited_bytes(expected[rel], rng, f"warmup{i}")
        write_in_place(os.path.join(ctx.a, rel), expected[rel])
        if wait_for_bytes(os.path.join(ctx.b, rel), expected[rel], 120) is None:
            raise BenchFailure(f"{label}: warm-up edit of {rel} never reached B\n"
                               f"{tail(os.path.join(ctx.root, logname))}")


def agent_bench(binary, template, corpus, work, seed, edits, gap, idle_seconds, failures, synced=None):
    """Two agents on fresh folders A and B that first syncs join; with `synced` (a Context whose A and B both hold
    `corpus`, synced by notesync), on those folders instead."""
    ctx = synced or Context.fresh(os.path.join(work, "agent"), template)
    tool = NoteSync(binary)
    expected = dict(corpus)
    rng = random.Random(f"{seed}-agent")
    result = {"edits": edits, "lost": 0}
    agents = []
    try:
        if not synced:
            run_step(tool.first_a(ctx), ctx.log)
            run_step(tool.first_b(ctx), ctx.log)
            verify("agent setup", expected, [("B", ctx.b, tool.exclude)])
        agents += start_agents(binary, ctx, [(ctx.a, []), (ctx.b, [])])
        paths = rng.sample(sorted(expected), edits + 3)
        warm_up(ctx, paths[:3], expected, rng, "agent", "agent-A.log")
        time.sleep(gap)
        latencies = time_edits(ctx.a, ctx.b, paths[3:], expected, rng, gap, "agent", result, failures)
        for agent in agents:
            if agent.poll() is not None:
                raise BenchFailure(f"agent exited early with {agent.returncode}")
        time.sleep(2)
        verify("agent edits", expected, [("A", ctx.a, tool.exclude), ("B", ctx.b, tool.exclude)])
        log(f"  agent: {len(latencies)} edits, p50 {result.get('p50', 0):.1f} ms, p99 {result.get('p99', 0):.1f} ms;"
            f" measuring idle CPU for {idle_seconds} s")
        time.sleep(3)
        tick = os.sysconf("SC_CLK_TCK")
        before = [proc_ticks(a.pid) for a in agents]
        t0 = time.perf_counter()
        time.sleep(idle_seconds)
        after = [proc_ticks(a.pid) for a in agents]
        elapsed = time.perf_counter() - t0
        cpu = [(y - x) / tick / elapsed * 100 for x, y in zip(before, after)]
        result.update(idle_cpu_pct=max(cpu), idle_cpu_pct_each=cpu, idle_seconds=idle_seconds,
                      rss_mb=max(proc_status_kb(a.pid, "VmRSS") for a in agents) / 1024,
                      hwm_mb=max(proc_status_kb(a.pid, "VmHWM") for a in agents) / 1024)
    except BenchFailure as error:
        failures.append(f"agent: {error}")
        log(f"FAILED: agent: {error}")
    finally:
        stop_agents(agents, "agent", failures)
    if not any(f.startswith("agent") for f in failures):
        TRASH.discard(ctx.root)
    return result


def timed(argv, logfile):
    """Wall seconds of one command run straight from here (no GNU time in between: these are milliseconds)."""
    with open(logfile, "ab") as out:
        out.write(("$ " + " ".join(argv) + "\n").encode())
        out.flush()
        start = time.perf_counter()
        rc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out).returncode
        wall = time.perf_counter() - start
    if rc != 0:
        raise BenchFailure(f"{' '.join(argv)} exited {rc}\n{tail(logfile)}")
    return wall


def served_bench(binary, template, corpus, work, runs, failures):
    """`notesync diff` and `notesync sync` of an unchanged folder while `notesync watch` runs on it (the agent
    answers through .notesync/agent.sock, scanning only what its watch saw change), and the same one-shot
    `diff` with no agent, for contrast."""
    label = f"served {len(corpus)}"
    ctx = Context.fresh(os.path.join(work, "served"), template)
    tool = NoteSync(binary)
    result = {"notes": len(corpus), "runs": runs}
    agents = []
    try:
        run_step(tool.first_a(ctx), ctx.log)
        alone = [timed([binary, "diff", "--notes", ctx.a], ctx.log) for _ in range(max(3, runs // 4))]
        agents += start_agents(binary, ctx, [(ctx.a, [])])
        # The agent's first full sync answers the first request; every later one is served from its watch.
        deadline = time.monotonic() + 300
        while not os.path.exists(os.path.join(ctx.a, ".notesync", "agent.sock")):
            if time.monotonic() > deadline or agents[0].poll() is not None:
                raise BenchFailure(f"the agent never opened its socket\n{tail(os.path.join(ctx.root, 'agent-A.log'))}")
            time.sleep(0.05)
        timed([binary, "sync", "--notes", ctx.a], ctx.log)
        samples = {"diff": [], "sync": []}
        for _ in range(runs):
            for command in ("diff", "sync"):
                samples[command].append(timed([binary, command, "--notes", ctx.a], ctx.log) * 1000)
        for command, values in samples.items():
            values.sort()
            result[command] = {"p50": statistics.median(values), "max": values[-1], "min": values[0]}
        result["alone_diff_ms"] = statistics.median(alone) * 1000
        log(f"  {label}: agent-served diff p50 {result['diff']['p50']:.1f} ms, sync p50 {result['sync']['p50']:.1f} ms;"
            f" one-shot diff without the agent {result['alone_diff_ms']:.0f} ms")
    except BenchFailure as error:
        failures.append(f"{label}: {error}")
        log(f"FAILED: {label}: {error}")
    finally:
        stop_agents(agents, label, failures)
    if not any(f.startswith(label) for f in failures):
        TRASH.discard(ctx.root)
    return result


def served_rows(served, ntools):
    blank = [""] * (ntools - 1)
    if not served or "diff" not in served:
        return []
    notes = f"{served['notes']:,}"
    rows = []
    for command in ("diff", "sync"):
        cell = served[command]
        rows.append([f"{notes} unchanged notes: `notesync {command}` with the agent running", "wall ms",
                     f"{cell['p50']:.1f} ({cell['min']:.1f}–{cell['max']:.1f})"] + blank
                    + [f"≤50 ms {mark(cell['p50'] <= 50)}"])
    rows.append([f"{notes} unchanged notes: one-shot `notesync diff`, no agent", "wall ms",
                 f"{served['alone_diff_ms']:.0f}"] + blank + [""])
    return rows
