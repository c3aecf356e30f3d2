"""The agent across sshfs: the server on the local disk of one machine, reached by the other through sshfs
(an sshd on loopback)."""

import os
import random
import shutil
import signal
import subprocess
import time

from .agent import start_agents, stop_agents, time_edits, warm_up
from .common import BenchFailure, TRASH, log, run_step, tail
from .folders import verify
from .report import latency_rows
from .tools import Context, NoteSync


def sshfs_unavailable():
    """Why an sshfs mount cannot be made here, or None when it can."""
    for tool in ("/usr/bin/sshfs", "/usr/sbin/sshd", "/usr/bin/ssh-keygen", "/usr/bin/fusermount3"):
        if not os.access(tool, os.X_OK):
            return f"{tool} is missing (scripts/bench installs sshfs and openssh-server)"
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as error:
        return f"/dev/fuse cannot be opened ({error.strerror}): this machine cannot mount FUSE"
    return None


class SshfsMount:
    """An sshd on loopback with its own host key, user key and config in `state` (no system file is read or
    changed), and one sshfs mount of `remote` at `mountpoint`, as the Swift tests' SshfsHost makes them."""

    def __init__(self, state, remote, mountpoint):
        self.state, self.remote, self.mountpoint = state, remote, mountpoint
        self.sshd_pid = None
        self.sshfs = None

    def start(self):
        os.makedirs(self.state, exist_ok=True)
        os.makedirs(self.mountpoint, exist_ok=True)
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation folder
        for key in ("hostkey", "userkey"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(self.state, key)],
                           check=True)
        shutil.copy(os.path.join(self.state, "userkey.pub"), os.path.join(self.state, "authorized_keys"))
        log_path = os.path.join(self.state, "sshd.log")
        for _ in range(5):
            port = random.randint(20000, 29999)
            config = os.path.join(self.state, "sshd_config")
            with open(config, "w") as f:
                f.write(f"Port {port}\nListenAddress 127.0.0.1\nHostKey {self.state}/hostkey\n"
                        f"AuthorizedKeysFile {self.state}/authorized_keys\nPasswordAuthentication no\n"
                        f"KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nStrictModes no\n"
                        f"UsePAM no\nPidFile {self.state}/sshd.pid\nSubsystem sftp internal-sftp\n")
            # sshd listens before it detaches: a port already taken fails here, and another is tried.
            if subprocess.run(["/usr/sbin/sshd", "-f", config, "-E", log_path]).returncode != 0:
                continue
            deadline = time.monotonic() + 10
            while self.sshd_pid is None and time.monotonic() < deadline:
                try:
                    with open(os.path.join(self.state, "sshd.pid")) as f:
                        self.sshd_pid = int(f.read().strip())
                except (OSError, ValueError):
                    time.sleep(0.02)
            if self.sshd_pid:
                break
        if not self.sshd_pid:
            raise BenchFailure(f"sshfs: sshd did not start on loopback\n{tail(log_path)}")
        options = (f"IdentityFile={self.state}/userkey,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,"
                   "BatchMode=yes,LogLevel=ERROR")
        sshfs_log = open(os.path.join(self.state, "sshfs.log"), "ab")
        self.sshfs = subprocess.Popen(["sshfs", "-f", "-p", str(port), "-o", options, f"root@127.0.0.1:{self.remote}",
                                       self.mountpoint], stdin=subprocess.DEVNULL, stdout=sshfs_log,
                                      stderr=sshfs_log)
        deadline = time.monotonic() + 15
        while not os.path.ismount(self.mountpoint):
            if self.sshfs.poll() is not None or time.monotonic() > deadline:
                raise BenchFailure(f"sshfs: the mount failed\n{tail(os.path.join(self.state, 'sshfs.log'))}")
            time.sleep(0.02)

    def stop(self):
        if os.path.ismount(self.mountpoint):
            subprocess.run(["fusermount3", "-u", self.mountpoint])
        if self.sshfs is not None:
            try:
                self.sshfs.wait(10)
            except subprocess.TimeoutExpired:
                self.sshfs.kill()
                self.sshfs.wait()
        if os.path.ismount(self.mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", self.mountpoint])
        if self.sshd_pid:
            try:
                os.kill(self.sshd_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            self.sshd_pid = None


def sshfs_bench(binary, template, corpus, work, seed, edits, gap, poll, failures):
    """Agent A on the server folder itself (inotify on its log), agent B on an sshfs mount of it (polling every
    `poll` s): N edits on A timed until B holds the bytes, then N edits on B timed until A holds them."""
    reason = sshfs_unavailable()
    if reason:
        log(f"  sshfs: SKIPPED: {reason}")
        return {"skipped": reason}
    ctx = Context.fresh(os.path.join(work, "sshfs"), template)
    mount = SshfsMount(os.path.join(ctx.root, "ssh"), ctx.shared, os.path.join(ctx.root, "mnt"))
    tool = NoteSync(binary)
    expected = dict(corpus)
    rng = random.Random(f"{seed}-sshfs")
    down = {"edits": edits, "lost": 0, "poll": poll}
    up = {"edits": edits, "lost": 0}
    result = {"poll": poll, "notes": len(corpus), "a_to_b": down, "b_to_a": up}
    agents = []
    try:
        mount.start()
        run_step(tool.first_a(ctx), ctx.log)
        first_b = run_step([([binary, "init", "--notes", ctx.b, "--server", mount.mountpoint, "--device-name", "B"], None),
                            ([binary, "sync", "--notes", ctx.b], None)], ctx.log)
        result["first_sync_b_s"] = first_b["wall"]
        verify("sshfs setup", expected, [("B", ctx.b, tool.exclude)])
        agents += start_agents(binary, ctx, [(ctx.a, ["--log-level", "debug"]),
                                             (ctx.b, ["--log-level", "debug", "--poll-interval", str(poll)])])
        paths = rng.sample(sorted(expected), 2 * edits + 3)
        warm_up(ctx, paths[:3], expected, rng, "sshfs", "agent-B.log")
        time.sleep(gap)
        time_edits(ctx.a, ctx.b, paths[3:3 + edits], expected, rng, gap, "sshfs A->B", down, failures, jitter=poll)
        time_edits(ctx.b, ctx.a, paths[3 + edits:], expected, rng, gap, "sshfs B->A", up, failures, jitter=poll)
        for agent in agents:
            if agent.poll() is not None:
                raise BenchFailure(f"agent exited early with {agent.returncode}")
        time.sleep(2)
        verify("sshfs edits", expected, [("A", ctx.a, tool.exclude), ("B", ctx.b, tool.exclude)])
        with open(os.path.join(ctx.root, "agent-B.log"), "rb") as f:
            primitive = [l for l in f.read().decode("utf-8", "replace").splitlines() if "server.primitive=" in l]
        result["primitive_log"] = primitive[0] if primitive else None
        for name, r in (("A→B", down), ("B→A", up)):
            log(f"  sshfs {name}: {edits} edits, p50 {r.get('p50', 0):.1f} ms, p95 {r.get('p95', 0):.1f} ms, "
                f"p99 {r.get('p99', 0):.1f} ms, max {r.get('max', 0):.1f} ms, lost {r['lost']}")
    except BenchFailure as error:
        failures.append(f"sshfs: {error}")
        log(f"FAILED: sshfs: {error}")
    finally:
        stop_agents(agents, "sshfs agent", failures)
        mount.stop()
    if not any(f.startswith("sshfs") for f in failures):
        TRASH.discard(ctx.root)
    return result


def sshfs_rows(sshfs, ntools):
    blank = [""] * (ntools - 1)
    if not sshfs:
        return []
    if "skipped" in sshfs:
        return [["agent across sshfs", f"(skipped: {sshfs['skipped']})", "—"] + blank + [""]]
    rows = []
    if "first_sync_b_s" in sshfs:
        rows.append([f"sshfs: init and first sync of B through the mount ({sshfs['notes']:,} notes)", "wall s",
                     f"{sshfs['first_sync_b_s']:.2f}"] + blank + [""])
    titles = {"a_to_b": f"sshfs: edit on A (server folder) → B (sshfs mount, polls every {sshfs['poll']} s)",
              "b_to_a": "sshfs: edit on B (sshfs mount) → A (inotify on the server's log)"}
    rows += latency_rows(titles, sshfs, blank)
    return rows
