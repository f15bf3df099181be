"""Processes, daemons and machine state for the conformance job.

Everything the job starts is a Harness child: it dies with the runner
(PR_SET_PDEATHSIG) and is stopped by Harness.close() in any case. The job
runs in a private mount namespace (run.py re-executes itself under
`unshare -m`): /dev/null is a bind mount there, so Perfetto's CLI, which
removes its -o path when the service ends a session with an error, gets
EBUSY instead of deleting the machine's /dev/null; /system is a tmpfs that
holds the two links the command-line tests exec. The namespace and its
mounts go away with the job's last process. What stays on the machine's
own file systems (the empty /system directory, tracefs instances, the
top-level tracefs switches Perfetto's traced_probes writes) is restored
by MachineState.restore().
"""

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

PR_SET_PDEATHSIG = 1
# Our daemons' log level: info, so that a failure's logs say which
# connection closed and why; TG_CONFORMANCE_LOG_LEVEL=debug for more.
LOG_LEVEL = os.environ.get("TG_CONFORMANCE_LOG_LEVEL", "info")
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    # Runs in the child between fork and exec: the child gets SIGKILL when
    # the runner dies, so a killed job leaves no daemon behind.
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Timeout(Exception):
    pass


def wait_until(what, pred, timeout_s, step_s=0.05):
    """Polls pred() until it is true; raises Timeout naming what."""
    end = time.monotonic() + timeout_s
    while True:
        if pred():
            return
        if time.monotonic() > end:
            raise Timeout("%s: not within %.0f s" % (what, timeout_s))
        time.sleep(step_s)


class Harness:
    """Starts children and stops every one of them (close())."""

    def __init__(self):
        self.children = []
        self.probe_pids = []  # every tracegate-probes started (tracefs)

    def spawn(self, argv, log_path, env=None, pass_fds=(), stdin=None):
        log = open(log_path, "ab")
        try:
            p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=stdin if stdin is not None
                                 else subprocess.DEVNULL,
                                 env=env, pass_fds=pass_fds,
                                 start_new_session=True,
                                 preexec_fn=_die_with_parent)
        finally:
            log.close()
        self.children.append(p)
        return p

    def spawn_ready(self, argv, log_path, env=None):
        """Spawns a daemon that takes --ready-fd FD (appended to argv) and
        waits for its "ready ..." line: (process, the line's words after
        "ready"); Timeout if it exits or closes the fd first."""
        r, w = os.pipe()
        try:
            p = self.spawn(argv + ["--ready-fd", str(w)], log_path, env=env,
                           pass_fds=(w,))
        finally:
            os.close(w)
        with os.fdopen(r) as rf:
            words = rf.readline().split()  # EOF if it exits before
        if not words or words[0] != "ready":
            raise Timeout("%s did not come up (see %s)"
                          % (os.path.basename(argv[0]), log_path))
        return p, words[1:]

    def run(self, argv, log_path, timeout_s, env=None):
        """Runs argv to completion; its exit code, or None on timeout."""
        p = self.spawn(argv, log_path, env=env)
        try:
            return p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with open(log_path, "ab") as log:
                log.write(b"\nconformance: timed out after %d s, killed\n"
                          % timeout_s)
            self.stop(p, grace_s=0)
            return None
        finally:
            self.forget(p)

    def forget(self, p):
        if p in self.children:
            self.children.remove(p)

    def stop(self, p, grace_s=5.0):
        """SIGTERM (its whole process group), then SIGKILL after grace_s."""
        if p.poll() is None and grace_s > 0:
            _signal_group(p, signal.SIGTERM)
            try:
                p.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        if p.poll() is None:
            _signal_group(p, signal.SIGKILL)
            p.wait()
        else:
            # The leader is gone; whatever it forked in its group goes too.
            _signal_group(p, signal.SIGKILL)
        self.forget(p)

    def close(self):
        for p in list(reversed(self.children)):
            self.stop(p)


def _signal_group(p, sig):
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def socket_listens(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


class Stack:
    """One service and one probes producer on sockets of a fresh directory.

    service: "tracegated" or "traced"; probes: "tracegate-probes",
    "traced_probes" or None. env() is the environment Perfetto's clients
    need to find this service.
    """

    def __init__(self, h, tools, workdir, service, probes):
        self.h, self.tools, self.dir = h, tools, workdir
        self.service, self.probes = service, probes
        # The sockets live in a short directory of their own: a UNIX
        # socket path holds at most 107 bytes, and the logs' directory is
        # named after the test.
        self.sockdir = tempfile.mkdtemp(prefix="tgconf-")
        self.psock = os.path.join(self.sockdir, "p")
        self.csock = os.path.join(self.sockdir, "c")
        self.procs = []

    def env(self):
        e = dict(os.environ)
        e["PERFETTO_PRODUCER_SOCK_NAME"] = self.psock
        e["PERFETTO_CONSUMER_SOCK_NAME"] = self.csock
        e["TMPDIR"] = self.dir
        return e

    def start(self):
        t = self.tools
        log = os.path.join(self.dir, self.service + ".log")
        if self.service == "tracegated":
            p, _ = self.h.spawn_ready(
                [t.tracegated, "--producer-socket", self.psock,
                 "--consumer-socket", self.csock, "--log-level", LOG_LEVEL],
                log)
            self.procs.append(p)
        else:
            self.procs.append(self.h.spawn([t.perfetto_bin("traced")], log,
                                           env=self.env()))
            wait_until("traced's consumer socket",
                       lambda: socket_listens(self.csock), 10)
            wait_until("traced's producer socket",
                       lambda: socket_listens(self.psock), 10)
        if self.probes:
            self.start_probes()

    def start_probes(self):
        t = self.tools
        log = os.path.join(self.dir, self.probes + ".log")
        if self.probes == "tracegate-probes":
            argv = [t.probes, "--socket", self.psock, "--log-level",
                    LOG_LEVEL]
        else:
            argv = [t.perfetto_bin("traced_probes")]
        p = self.h.spawn(argv, log, env=self.env())
        self.procs.append(p)
        if self.probes == "tracegate-probes":
            self.h.probe_pids.append(p.pid)
        wait_until("%s registering linux.ftrace" % self.probes,
                   lambda: "linux.ftrace" in self.data_sources(), 15, 0.1)

    def query(self):
        """The service's state as tracegate query --json reports it."""
        r = subprocess.run([self.tools.cli, "query", "--socket", self.csock,
                            "--json"], capture_output=True, timeout=20)
        if r.returncode != 0:
            return {}
        try:
            return json.loads(r.stdout)
        except ValueError:
            return {}

    def data_sources(self):
        st = self.query().get("service_state") or {}
        return {d["ds_descriptor"]["name"] for d in st.get("data_sources", [])}

    def sessions_started(self):
        st = self.query().get("service_state") or {}
        return st.get("num_sessions_started", 0)

    def stop(self):
        # Producers first, so that the service sees them leave.
        for p in reversed(self.procs):
            self.h.stop(p)
        self.procs = []
        shutil.rmtree(self.sockdir, ignore_errors=True)


TRACEFS = "/sys/kernel/tracing"


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _write(path, text):
    try:
        with open(path, "w") as f:
            f.write(text)
        return True
    except OSError:
        return False


class MachineState:
    """What the job may change outside its namespace, and puts back."""

    def __init__(self):
        self.made_system = False
        self.tracefs = os.path.isdir(os.path.join(TRACEFS, "events"))
        self.instances = set(self._instances())
        self.top = {f: _read(os.path.join(TRACEFS, f))
                    for f in ("tracing_on", "buffer_size_kb", "set_event",
                              "trace_clock")} if self.tracefs else {}

    @staticmethod
    def _instances():
        try:
            return os.listdir(os.path.join(TRACEFS, "instances"))
        except OSError:
            return []

    def ensure_system_links(self, perfetto_bin):
        """/system/bin/{perfetto,trigger_perfetto} in the job's namespace,
        made again when they are gone: /system is a directory of the
        machine's root, shared with whoever else runs Perfetto's tests
        here, and when another process removes it, the namespace's tmpfs
        on it goes with it. True when the links are there."""
        links = {t: os.path.join(perfetto_bin, t)
                 for t in ("perfetto", "trigger_perfetto")}
        if all(os.path.realpath("/system/bin/" + t) == os.path.realpath(p)
               for t, p in links.items()):
            return True
        if not os.path.isdir("/system"):
            os.mkdir("/system", 0o755)
            self.made_system = True
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755",
                           "tg-conformance", "/system"]).returncode != 0:
            return False
        os.mkdir("/system/bin")
        for t, p in links.items():
            os.symlink(p, "/system/bin/" + t)
        return True

    def restore(self, probe_pids):
        """Undoes what the job left; returns the list of what it undid.

        Only the tracefs instances of the tracegate-probes the job ran
        (named tracegate-PID-N) are removed: the machine is shared, and
        another run's instances are not ours to take.
        """
        undone = []
        if self.made_system:
            try:
                os.rmdir("/system")
            except OSError as e:
                undone.append("/system not removed: %s" % e)
        if not self.tracefs:
            return undone
        ours = tuple("tracegate-%d-" % pid for pid in probe_pids)
        for name in set(self._instances()) - self.instances:
            if name.startswith(ours) and os.path.isdir(os.path.join(TRACEFS, "instances", name)):
                try:
                    os.rmdir(os.path.join(TRACEFS, "instances", name))
                    undone.append("tracefs instance %s removed" % name)
                except OSError as e:
                    undone.append("tracefs instance %s not removed: %s"
                                  % (name, e))
        for f, before in self.top.items():
            path = os.path.join(TRACEFS, f)
            now = _read(path)
            if before is None or now == before:
                continue
            if f == "set_event":
                _write(path, "")  # O_TRUNC disables every event
                for ev in before.split():
                    # An event another tracer made (a synthetic one) may be
                    # gone by now: said, not fatal to the rest.
                    try:
                        with open(path, "a") as fa:
                            fa.write(ev + "\n")
                    except OSError as e:
                        undone.append("tracefs event %s not enabled again: %s"
                                      % (ev, e))
            elif f == "trace_clock":
                sel = [w[1:-1] for w in before.split() if w.startswith("[")]
                if sel:
                    _write(path, sel[0])
            else:
                _write(path, before.strip())
            undone.append("tracefs %s restored" % f)
        return undone
