"""The corpus and the folders of a run: reading, editing and renaming notes, and checking that A and B hold
exactly what they should."""

import os
import random

from .common import BenchFailure, gen_corpus, log


def read_tree(root, exclude):
    out = {}
    for rel in gen_corpus.walk_files(root, exclude):
        with open(os.path.join(root, rel), "rb") as f:
            out[rel] = f.read()
    return out


class Sampled:
    """How `verify` checks at the huge size, where reading a million notes back after every step took longer than the
    steps: every path and size (one lstat each), and the bytes of the notes edited since the start plus `count` more
    chosen at random. None: every byte of every note (all other sizes)."""
    count = None
    edited = set()


def verify(label, expected, folders):
    """Every folder must hold exactly `expected` (relative path -> bytes); see Sampled for the huge size."""
    if Sampled.count is not None:
        return verify_sampled(label, expected, folders)
    for name, root, exclude in folders:
        actual = read_tree(root, exclude)
        missing = sorted(set(expected) - set(actual))
        extra = sorted(set(actual) - set(expected))
        differ = sorted(p for p in set(expected) & set(actual) if expected[p] != actual[p])
        if missing or extra or differ:
            raise BenchFailure(f"{label}: {name} does not hold what A holds: {len(missing)} missing "
                               f"{missing[:3]}, {len(extra)} extra {extra[:3]}, {len(differ)} differ {differ[:3]}")


def verify_sampled(label, expected, folders):
    rng = random.Random(label)
    for name, root, exclude in folders:
        sizes = {}
        for rel in gen_corpus.walk_files(root, exclude):
            try:
                sizes[rel] = os.lstat(os.path.join(root, rel)).st_size
            except FileNotFoundError:
                pass
        missing = sorted(set(expected) - set(sizes))
        extra = sorted(set(sizes) - set(expected))
        differ = sorted(p for p in set(expected) & set(sizes) if len(expected[p]) != sizes[p])
        read = (Sampled.edited & set(sizes)) | set(rng.sample(sorted(sizes), min(Sampled.count, len(sizes))))
        for rel in sorted(read):
            with open(os.path.join(root, rel), "rb") as f:
                if f.read() != expected.get(rel):
                    differ.append(rel)
        if missing or extra or differ:
            raise BenchFailure(f"{label}: {name} does not hold what A holds: {len(missing)} missing "
                               f"{missing[:3]}, {len(extra)} extra {extra[:3]}, {len(differ)} differ {differ[:3]}"
                               f" (every path and size checked, the bytes of {len(read)} notes)")


def edited_bytes(old, rng, tag):
    """The note with one line changed in the middle and a line appended: new bytes, new size."""
    lines = old.split(b"\n")
    middle = len(lines) // 2
    word = " ".join(rng.choices(gen_corpus.WORDS, k=rng.randint(4, 12)))
    lines[middle] = lines[middle] + f" (edited {tag}: {word})".encode()
    return b"\n".join(lines) + f"\n- follow-up {tag}: {word}\n".encode()


def write_in_place(path, data):
    """Overwrites the note's bytes in the same inode, as an editor that saves in place does."""
    with open(path, "r+b") as f:
        f.write(data)
        f.truncate()


def rename_half(ctx, expected):
    """Renames top-level folders of A, the largest first, until they hold half of the notes (each one `mv`); the
    expected tree follows. Returns how many notes and folders moved."""
    counts = {}
    for rel in expected:
        if "/" in rel:
            counts[rel.split("/", 1)[0]] = counts.get(rel.split("/", 1)[0], 0) + 1
    chosen, moved = [], 0
    for top, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        if moved * 2 >= len(expected):
            break
        chosen.append(top)
        moved += count
    for top in chosen:
        os.rename(os.path.join(ctx.a, top), os.path.join(ctx.a, "renamed " + top))
    renamed = {}
    for rel, data in expected.items():
        top = rel.split("/", 1)[0]
        renamed["renamed " + rel if "/" in rel and top in chosen else rel] = data
    expected.clear()
    expected.update(renamed)
    return moved, len(chosen)


def tree_size(root):
    """Apparent bytes and files under root."""
    size = files = 0
    for folder, _, names in os.walk(root):
        for name in names:
            try:
                size += os.lstat(os.path.join(folder, name)).st_size
                files += 1
            except FileNotFoundError:
                pass
    return size, files


def edit_notes(ctx, expected, count, rng, tag):
    for rel in rng.sample(sorted(expected), count):
        Sampled.edited.add(rel)
        expected[rel] = edited_bytes(expected[rel], rng, tag)
        write_in_place(os.path.join(ctx.a, rel), expected[rel])


def make_corpus(work, notes, seed):
    template = os.path.join(work, f"corpus-{notes}")
    log(f"generating {notes} notes (seed {seed}) in {template}")
    gen_corpus.generate(template, notes, seed)
    return template, read_tree(template, ())
