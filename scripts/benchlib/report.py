"""The report: statistics of the samples, the targets, and the table."""

import datetime
import os
import platform
import statistics

from .common import METRICS, RENAME_METRICS, SCENARIOS


def percentile(sorted_values, p):
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, -(-len(sorted_values) * p // 100))
    return sorted_values[int(rank) - 1]


def summarize(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def scenario_metrics(scenario, extra=()):
    """The metrics of a scenario's rows: METRICS, then `extra` (S3_METRICS through a bucket), then the rename's."""
    return METRICS + list(extra) + (RENAME_METRICS if scenario == "rename" else [])


def summarize_samples(samples, extra=()):
    out = {}
    for tool, scenarios in samples.items():
        out[tool] = {}
        for scenario, runs in scenarios.items():
            if runs:
                out[tool][scenario] = {m: summarize([r[m] for r in runs])
                                       for m, _ in scenario_metrics(scenario, extra)}
    return out


def fmt(stat, metric):
    if stat is None:
        return "—"
    counts = ("rss", "shared_files", "refused", "requests")
    digits = 0 if metric in counts else (3 if abs(stat["median"]) < 10 else 1)
    return f"{stat['median']:.{digits}f} ({stat['min']:.{digits}f}–{stat['max']:.{digits}f})"


def mark(ok):
    return "✓" if ok else "✗"


def one_shot_rows(summary, tools, others, prefix, targets, extra=(), scenarios=SCENARIOS):
    """Rows (scenario, metric, per-tool cells…, ratios, target) for one corpus size."""
    rows = []
    for scenario, title in scenarios:
        for metric, metric_title in scenario_metrics(scenario, extra):
            cells = [fmt(summary.get(t, {}).get(scenario, {}).get(metric), metric) for t in tools]
            ratios = []
            med = {t: summary.get(t, {}).get(scenario, {}).get(metric, {}).get("median") for t in tools}
            for other in others:
                if metric == "wall" and med.get("notesync") and med.get(other):
                    ratios.append(f"{med['notesync'] / med[other]:.2f}")
                else:
                    ratios.append("")
            rows.append([prefix + title if metric == "wall" else "", metric_title] + cells + ratios
                        + [targets(scenario, metric, med)])
    return rows


def rss_target(metric, med):
    """Issue 20: a one-shot sync's peak memory at most Unison's, at 10,000 and 100,000 notes."""
    if metric == "rss" and med.get("notesync") and med.get("unison"):
        return f"≤unison {mark(med['notesync'] <= med['unison'])}"
    return ""


def targets_10k(scenario, metric, med):
    if metric == "rss":
        return rss_target(metric, med)
    if metric != "wall" or not med.get("notesync"):
        return ""
    out = []
    encrypted = med.get("notesync-encrypted")
    if encrypted and scenario == "first_a":
        out.append(f"encrypted ≤1.2×plain {mark(encrypted <= 1.2 * med['notesync'])} ({encrypted / med['notesync']:.2f})")
    elif encrypted and scenario in ("noop", "edit1"):
        out.append(f"encrypted/plain {encrypted / med['notesync']:.2f}")
    if scenario in ("first_a", "noop", "edit1") and med.get("unison"):
        # Issue 20: at most 0.4 of Unison's time (an earlier issue asked for 0.5); the ratio to three places.
        ratio = med["notesync"] / med["unison"]
        out.append(f"≤0.4×unison {mark(ratio <= 0.4)} ({ratio:.3f})")
    if med.get("rclone"):
        out.append(f"<rclone {mark(med['notesync'] < med['rclone'])}")
    return "; ".join(out)


def targets_s3(scenario, metric, med):
    if metric == "wall" and scenario in ("first_a", "noop", "edit1") and med.get("notesync") and med.get("rclone"):
        return f"≤0.5×rclone {mark(med['notesync'] <= 0.5 * med['rclone'])}"
    return ""


def targets_100k(scenario, metric, med):
    ns = med.get("notesync")
    if ns is None:
        return ""
    if metric == "wall" and scenario == "first_a":
        return f"≤15 s {mark(ns <= 15)}"
    if metric == "wall" and scenario == "noop":
        return f"≤0.5 s {mark(ns <= 0.5)}"
    if metric == "rss":
        return "; ".join(t for t in (f"≤200 MB {mark(ns <= 200)}", rss_target(metric, med)) if t)
    return ""


def agent_rows(agent, ntools, prefix="", p50_target=100, p99_target=300, rss_target=60):
    """The agent's rows; `prefix` names a size other than the default, with that size's targets (issue 20 at
    100,000 notes: p50 ≤ 40 ms, p99 ≤ 80 ms, 64 MB). A target of None: none at that size, the cell stays empty."""
    blank = [""] * (ntools - 1)

    def target(value, limit, unit):
        return "" if limit is None else f"≤{limit} {unit} {mark(value <= limit)}"

    if not agent or "p50" not in agent:
        return [[f"{prefix}agent", "(failed or skipped)", "—"] + blank + [""]]
    return [
        [f"{prefix}agent: edit on A → B has it ({agent['edits']} edits)", "p50 ms", f"{agent['p50']:.1f}"] + blank
        + [target(agent['p50'], p50_target, "ms")],
        ["", "p95 ms", f"{agent['p95']:.1f}"] + blank + [""],
        ["", "p99 ms", f"{agent['p99']:.1f}"] + blank + [target(agent['p99'], p99_target, "ms")],
        ["", "max ms", f"{agent['max']:.1f}"] + blank + [""],
        ["", "lost edits", f"{agent['lost']}"] + blank + [f"0 {mark(agent['lost'] == 0)}"],
        [f"{prefix}agent idle ({agent['idle_seconds']:.0f} s)", "CPU %", f"{agent['idle_cpu_pct']:.2f}"] + blank
        + [f"≤1 % {mark(agent['idle_cpu_pct'] <= 1)}"],
        ["", "RSS MB", f"{agent['rss_mb']:.1f}"] + blank + [target(agent['rss_mb'], rss_target, "MB")],
        ["", "peak RSS MB", f"{agent['hwm_mb']:.1f}"] + blank + [""],
    ]


def latency_rows(titles, results, blank):
    """The rows of edits timed one way and the other: for each key of `titles`, its percentiles and lost edits."""
    rows = []
    for key, title in titles.items():
        r = results.get(key, {})
        if "p50" not in r:
            rows.append([title, "(failed)", "—"] + blank + [""])
            continue
        rows += [
            [f"{title} ({r['edits']} edits)", "p50 ms", f"{r['p50']:.1f}"] + blank + [""],
            ["", "p95 ms", f"{r['p95']:.1f}"] + blank + [""],
            ["", "p99 ms", f"{r['p99']:.1f}"] + blank + [""],
            ["", "max ms", f"{r['max']:.1f}"] + blank + [""],
            ["", "lost edits", f"{r['lost']}"] + blank + [f"0 {mark(r['lost'] == 0)}"],
        ]
    return rows


def render(rows, header):
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]

    def line(cells):
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), sep] + [line(r) for r in rows])


def machine_info():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "nproc": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "python": platform.python_version(), "loadavg_start": os.getloadavg()}
