"""The tools compared: each syncs device folders A and B through a shared folder (for notesync, the server), with
its state kept inside the run's folder."""

import os
import subprocess

from .common import TRASH, capture, without_aws
from .folders import tree_size


class NoteSync:
    name = "notesync"
    exclude = (".notesync",)
    checks_shared = False  # the server holds digests, not the notes

    def __init__(self, binary, s3=None):
        """With `s3` (an S3Service), the server is a prefix of its bucket: the credentials go in the environment,
        the endpoint in `init` (which keeps it in the folder's state)."""
        self.bin = binary
        self.env = dict(without_aws(os.environ), **s3.notesync_env()) if s3 else None
        self.init_extra = ["--endpoint", s3.endpoint] if s3 else []

    def location(self, bucket, prefix):
        return f"s3://{bucket}/{prefix}"

    def first_a(self, ctx):
        return [([self.bin, "init", "--notes", ctx.a, "--server", ctx.shared, "--create-server",
                  "--device-name", "A"] + self.init_extra, self.env),
                ([self.bin, "sync", "--notes", ctx.a], self.env)]

    def first_b(self, ctx):
        return [([self.bin, "init", "--notes", ctx.b, "--server", ctx.shared, "--device-name", "B"]
                 + self.init_extra, self.env),
                ([self.bin, "sync", "--notes", ctx.b], self.env)]

    def sync(self, ctx, side):
        return [([self.bin, "sync", "--notes", side], self.env)]

    def version(self):
        return capture([self.bin, "--version"])


class NoteSyncEncrypted(NoteSync):
    """notesync on an encrypted server (docs/encryption.md): `init --create-server --encrypt`, the passphrase in the
    environment, scrypt at its real cost (each `init` unlocks the key once, timed with the first syncs)."""
    name = "notesync-encrypted"

    def __init__(self, binary, s3=None):
        super().__init__(binary, s3)
        self.env = dict(self.env or os.environ, NOTESYNC_PASSPHRASE="a benchmark passphrase")

    def first_a(self, ctx):
        (init, env), sync = super().first_a(ctx)
        return [(init + ["--encrypt"], env), sync]


class Unison:
    name = "unison"
    exclude = ()
    checks_shared = True

    def _env(self, ctx):
        env = dict(os.environ, UNISON=os.path.join(ctx.root, "unison-state"))
        os.makedirs(env["UNISON"], exist_ok=True)
        return env

    def _cmd(self, ctx, side):
        return [(["unison", side, ctx.shared, "-batch", "-auto", "-silent", "-times"], self._env(ctx))]

    def first_a(self, ctx):
        return self._cmd(ctx, ctx.a)

    def first_b(self, ctx):
        return self._cmd(ctx, ctx.b)

    def sync(self, ctx, side):
        return self._cmd(ctx, side)

    def version(self):
        return capture(["unison", "-version"])


class Rclone:
    name = "rclone"
    exclude = ()
    checks_shared = True

    def __init__(self, s3=None):
        """With `s3` (an S3Service), the shared folder is a prefix of its bucket on the remote `s3:`, configured
        by environment only (RCLONE_CONFIG_S3_*); the flags stay those of the folder scenario."""
        self.s3_env = s3.rclone_env() if s3 else None

    def location(self, bucket, prefix):
        return f"s3:{bucket}/{prefix}"

    def _cmd(self, ctx, side, resync):
        state = os.path.join(ctx.root, "rclone-state")
        env = dict(without_aws(os.environ) if self.s3_env else os.environ,
                   XDG_CACHE_HOME=os.path.join(state, "cache"), XDG_CONFIG_HOME=os.path.join(state, "config"),
                   RCLONE_CONFIG="", **(self.s3_env or {}))
        argv = ["rclone", "bisync", side, ctx.shared, "--workdir", os.path.join(state, "bisync"),
                "--cache-dir", os.path.join(state, "cache"), "--config", ""]
        return [(argv + (["--resync"] if resync else []), env)]

    def first_a(self, ctx):
        return self._cmd(ctx, ctx.a, True)

    def first_b(self, ctx):
        return self._cmd(ctx, ctx.b, True)

    def sync(self, ctx, side):
        return self._cmd(ctx, side, False)

    def forced_sync(self, ctx, side):
        """What rclone says to run after its safety abort ("too many deletes ... Run with --force")."""
        return [(self._cmd(ctx, side, False)[0][0] + ["--force"], self._cmd(ctx, side, False)[0][1])]

    def version(self):
        return capture(["rclone", "version"]).splitlines()[0]


class Context:
    """One run's folders: device A, device B, the shared folder, and the tools' state beside them. With `s3` (an
    S3Service) and a tool, the shared location is the prefix `prefix` of its bucket instead, as the tool names it."""

    def __init__(self, root, s3=None, tool=None, prefix=None):
        self.root = root
        self.a = os.path.join(root, "A")
        self.b = os.path.join(root, "B")
        self.s3, self.prefix = s3, prefix
        self.shared = tool.location(s3.bucket, prefix) if s3 else os.path.join(root, "shared")
        self.log = os.path.join(root, "commands.log")

    @classmethod
    def fresh(cls, root, template, s3=None, tool=None, prefix=None):
        if os.path.exists(root):
            TRASH.discard(root)
        os.makedirs(root)
        ctx = cls(root, s3, tool, prefix)
        subprocess.run(["cp", "-a", template, ctx.a], check=True)  # keeps the corpus's mtimes
        os.makedirs(ctx.b)
        if not s3:
            os.makedirs(ctx.shared)
        return ctx

    def shared_usage(self):
        """Bytes and files (objects) in the shared location."""
        return self.s3.usage(self.prefix) if self.s3 else tree_size(self.shared)

    def counters(self):
        """The S3 service's counters (S3Service.counters), None for a folder."""
        return self.s3.counters() if self.s3 else None
