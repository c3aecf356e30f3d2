#!/usr/bin/env python3
"""Deterministic corpus of markdown-like notes for scripts/bench.

    scripts/gen-corpus.py DIR [--notes N] [--seed S] [--digest]

Writes N notes (default 10,000) into nested folders (depth 1-4) under DIR, which must be missing or empty.
Sizes are log-normal around 1.4 KB, with about one note in 500 between 50 KB and 200 KB. Names are mostly ASCII
slugs, some with spaces or accented (NFC) letters. Every note gets a fixed mtime, so the same --notes and --seed
always give the same paths, bytes and mtimes. --digest prints a SHA-256 over all of that, to check.
Standard library only.
"""

import argparse
import hashlib
import math
import os
import random
import sys

# Fixed vocabulary: the text only has to look like notes, not mean anything.
WORDS = """
the of and to in is that for it as with was on be by this are or from at an but not have has had were which
their they them there than then these those when where while what who will would can could should may might must
note notes meeting project plan idea draft todo review design server client sync folder file record change log
entry commit branch merge conflict version release build test bug fix issue feature deadline budget team week
month today tomorrow yesterday morning evening call email reply question answer decision reason context summary
detail example list item step goal result problem solution option trade risk cost time data model query index
cache memory disk network latency throughput agent device laptop phone desktop editor vim emacs markdown text
line word paragraph heading table link image quote code script shell command config option value default user
account password key token session request response error warning message status state event queue worker
thread process signal timer clock date year chapter book article paper reading writing thinking learning garden
recipe coffee bread flour water salt sugar butter oven bake minutes hours travel train station ticket hotel city
river mountain walk run bike weather rain sun cloud wind snow spring summer autumn winter music song album guitar
""".split()

TITLE_WORDS = """
meeting notes plan ideas draft journal log review retro design spec todo reading recipe travel budget research
interview standup weekly monthly project roadmap backlog inbox archive someday reference howto checklist summary
""".split()

ACCENTED = ["café", "résumé", "naïve", "über", "señor", "façade", "crème", "jalapeño", "smörgåsbord", "déjà vu"]

FOLDER_WORDS = """
work home personal projects archive journal recipes travel reading research clients teams meetings ideas drafts
reference howto finance health garden music books papers talks code ops infra design product marketing sales
2019 2020 2021 2022 2023 2024 q1 q2 q3 q4 jan feb mar apr may jun jul aug sep oct nov dec alpha beta gamma delta
""".split()

BASE_MTIME = 1_700_000_000  # 2023-11-14, a fixed origin for every note's mtime


def make_folders(rng, count):
    """`count` distinct folder paths of depth 1-4, each one's parent also in the list."""
    folders = []
    seen = set()
    tops = max(4, int(math.sqrt(count)))
    while len(folders) < count:
        if not folders or len(folders) < tops or rng.random() < 0.15:
            parent = ""
        else:
            parent = rng.choice(folders)
            if parent.count("/") >= 3:  # depth 4 reached
                continue
        name = rng.choice(FOLDER_WORDS)
        if rng.random() < 0.3:
            name += "-" + rng.choice(FOLDER_WORDS)
        path = f"{parent}/{name}" if parent else name
        if path in seen:
            continue
        seen.add(path)
        folders.append(path)
    return folders


def note_size(rng):
    if rng.random() < 0.002:
        return rng.randint(50_000, 200_000)
    return int(min(64_000, max(40, rng.lognormvariate(math.log(1400), 0.7))))


def sentence(rng, n):
    words = rng.choices(WORDS, k=n)
    return " ".join(words).capitalize() + rng.choice([".", ".", ".", "?", "!", ":"])


def note_text(rng, title, size):
    """Markdown-like text of about `size` bytes (UTF-8)."""
    parts = [f"# {title}\n\n"]
    length = len(parts[0].encode())
    while length < size:
        kind = rng.random()
        if kind < 0.55:
            block = " ".join(sentence(rng, rng.randint(5, 18)) for _ in range(rng.randint(1, 5))) + "\n\n"
        elif kind < 0.75:
            block = "".join(f"- {'[ ] ' if rng.random() < 0.3 else ''}{sentence(rng, rng.randint(3, 10))}\n"
                            for _ in range(rng.randint(2, 6))) + "\n"
        elif kind < 0.85:
            block = f"## {sentence(rng, rng.randint(2, 5)).rstrip('.?!:')}\n\n"
        elif kind < 0.92:
            block = "```\n" + "".join(f"{rng.choice(WORDS)} = {rng.randint(0, 99999)}\n"
                                      for _ in range(rng.randint(2, 8))) + "```\n\n"
        else:
            block = f"> {sentence(rng, rng.randint(6, 14))}\n\n"
        parts.append(block)
        length += len(block.encode())
    return "".join(parts).encode()[:size].decode("utf-8", "ignore").rstrip() + "\n"


def note_name(rng, index):
    words = rng.choices(TITLE_WORDS, k=rng.randint(1, 3))
    r = rng.random()
    if r < 0.03:
        words.append(rng.choice(ACCENTED))
    sep = " " if rng.random() < 0.1 else "-"
    ext = ".txt" if rng.random() < 0.1 else ".md"
    return sep.join(words) + f"{sep}{index:06d}{ext}", " ".join(words).capitalize()


def generate(root, notes=10_000, seed=1):
    """Writes the corpus into `root` (missing or empty); returns the sorted list of relative paths."""
    rng = random.Random(seed)
    os.makedirs(root, exist_ok=True)
    if os.listdir(root):
        raise SystemExit(f"gen-corpus: {root} is not empty")
    folders = make_folders(rng, max(4, notes // 25))
    paths = []
    for index in range(notes):
        folder = rng.choice(folders)
        name, title = note_name(rng, index)
        rel = f"{folder}/{name}"
        data = note_text(rng, title, note_size(rng)).encode()
        full = os.path.join(root, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        mtime = (BASE_MTIME + index * 97 + rng.randint(0, 96)) * 1_000_000_000
        os.utime(full, ns=(mtime, mtime))
        paths.append(rel)
    return sorted(paths)


def tree_digest(root, exclude=(".notesync",)):
    """SHA-256 over every file's relative path, bytes and mtime (ns) under `root`, in sorted order."""
    h = hashlib.sha256()
    for rel in sorted(walk_files(root, exclude)):
        full = os.path.join(root, rel)
        h.update(rel.encode() + b"\0" + str(os.stat(full).st_mtime_ns).encode() + b"\0")
        with open(full, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def walk_files(root, exclude=(".notesync",)):
    """Relative paths of the regular files under `root`, skipping top-level names in `exclude`."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == root:
            dirnames[:] = [d for d in dirnames if d not in exclude]
            filenames = [f for f in filenames if f not in exclude]
        rel_dir = os.path.relpath(dirpath, root)
        for name in filenames:
            out.append(name if rel_dir == "." else f"{rel_dir}/{name}")
    return out


def main():
    parser = argparse.ArgumentParser(description="Write a deterministic corpus of notes.")
    parser.add_argument("dir")
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--digest", action="store_true", help="print a SHA-256 of paths, bytes and mtimes")
    args = parser.parse_args()
    paths = generate(args.dir, args.notes, args.seed)
    total = sum(os.path.getsize(os.path.join(args.dir, p)) for p in paths)
    print(f"{len(paths)} notes, {total / 1e6:.1f} MB in {args.dir}", file=sys.stderr)
    if args.digest:
        print(tree_digest(args.dir))


if __name__ == "__main__":
    main()
