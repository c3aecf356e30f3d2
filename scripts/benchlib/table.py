"""The run's table, from the rows of every section that ran, and what is printed above it."""

from .agent import served_rows
from .big import big_rows
from .huge import huge_rows
from .report import agent_rows, one_shot_rows, render, targets_100k, targets_10k
from .s3 import s3_rows
from .server_life import server_life_rows
from .sshfs import sshfs_rows


def print_report(results, args, names, info):
    """Builds the table of every section that ran, keeps it in `results["table"]` and prints it with the machine,
    the versions and the corpora."""
    others = [n for n in ("unison", "rclone") if n in names and "notesync" in names]
    header = ["scenario", "metric"] + names + [f"notesync/{n}" for n in others] + ["target"]
    rows = []
    if "one_shot" in results:
        prefix = "" if args.notes == 10_000 else f"{args.notes:,}: "
        rows += one_shot_rows(results["one_shot"]["summary"], names, others, prefix,
                              targets_10k if args.notes == 10_000 else (lambda *_: ""))
    if "agent" in results:
        rows += agent_rows(results["agent"], len(names) + len(others))
    if "served" in results:
        rows += served_rows(results["served"], len(names) + len(others))
    if "sshfs" in results:
        rows += sshfs_rows(results["sshfs"], len(names) + len(others))
    if "s3" in results:
        rows += s3_rows(results["s3"], names, others, args.notes == 10_000)
    if "large" in results:
        rows += one_shot_rows(results["large"]["summary"], names, others, f"{args.large_notes:,}: ",
                              targets_100k if args.large_notes == 100_000 else (lambda *_: ""))
    if "large_agent" in results:
        rows += agent_rows(results["large_agent"], len(names) + len(others), f"{args.large_notes:,}: ",
                           *((40, 80, 64) if args.large_notes == 100_000 else (100, 300, 60)))
    if "large_served" in results:
        rows += served_rows(results["large_served"], len(names) + len(others))
    if "huge" in results:
        rows += huge_rows(results["huge"], names, others, len(names) + len(others))
    if "server_life" in results:
        rows += server_life_rows(results["server_life"], len(names) + len(others))
    if "big" in results:
        rows += big_rows(results["big"], len(names) + len(others))
    table = render(rows, header)
    results["table"] = table

    print(f"notesync benchmark — {info['date']}")
    print(f"machine: {info['nproc']} CPUs, {info['cpu_model']}, Linux {info['kernel']}; load average "
          f"{info['loadavg_start'][0]:.1f} at start, {info['loadavg_end'][0]:.1f} at end (other work on the machine"
          f" makes the figures noisy)")
    for name, version in info["versions"].items():
        print(f"{name}: {version}")
    for c in results["corpora"]:
        runs = f"{c['runs']} runs per one-shot scenario" if c["runs"] else "agent only"
        print(f"corpus: {c['notes']:,} notes, {c['bytes'] / 1e6:.1f} MB, seed {args.seed}; {runs}"
              + (" (quick mode)" if args.quick else ""))
    print("cells: median (min–max); wall and CPU add up over the commands of a step (notesync's first syncs"
          " include `init`); RSS is the largest of them")
    if args.notes != 10_000 and not (args.skip_one_shot and args.skip_agent):
        print("targets are for 10,000 notes: not judged at this size")
    print()
    print(table)
    print()
    return table
