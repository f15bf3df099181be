#!/usr/bin/env python3
"""deb_install: the Debian packages of `make deb`, installed on this machine.

Installs the six packages with apt-get, as docs/collector.md's first day
and docs/operations.md say, then runs what they installed from where
they installed it. systemd is not PID 1 here, so each daemon starts
as its installed unit says: ExecStart= with the unit's Environment= and
EnvironmentFile=, as its User=/Group=/SupplementaryGroups= or DynamicUser=
(setpriv), with its AmbientCapabilities= and CapabilityBoundingSet= (all
other capabilities dropped) and NoNewPrivileges, in a mount namespace of
its own where ProtectKernelTunables= (/sys and /proc/sys read-only),
ReadOnlyPaths=, ReadWritePaths= and InaccessiblePaths= hold, after the
sys-kernel-tracing.mount it Wants= (tracefs mounted), with its
RuntimeDirectory=, StateDirectory=, LogsDirectory= and UMask=, and only
if its ConditionPathExists= holds; a template unit (X@.service) with its
instance name for %i. ProtectSystem=, PrivateTmp= and the other
sandboxing options are not reproduced. Checked:
  - the four service units are enabled, the users exist,
    the relay's and the collector's /etc directories are private;
  - every program has a man page;
  - an app built against the installed -dev package, with pkg-config and
    with find_package(tracegate-agent), loads the installed library and
    traces into the installed tracegated; the installed `tracegate record`
    (as a member of group tracegate) gets its events, and a user outside
    the group cannot reach the consumer socket;
  - the relay and the collector do not start before they have a
    certificate;
  - docs/collector.md's "From apt-get install to a snapshot in the UI",
    walked by running its commands as written (FirstDay): certificates
    from the installed tg-certs, the relay and the collector started from
    their units, the collector over HTTPS with client certificates, an
    inventory with label= names (and a second line, web2, for the same
    relay), health_listen, a trigger fired by `tracegate trigger` as an
    app would; then read back as JSON and traces: the hosts
    tracing by name with no problem, a client without a certificate
    refused by HTTPS and served /healthz by health_listen alone, the
    snapshot `tracegate snapshot --collector https://...` stored complete
    with each host's name and problems [] (GET /api/v1/snapshots/ID with
    the operator's certificate) and listed, the trigger's snapshot
    stored complete, the page served, the app's events and the probes'
    process tree in the stored file, sched events from the packaged
    flight config's linux.ftrace in the downloaded snapshot and in one
    host's part (`tracegate snapshot get ID --host`), trace_processor's
    name track of each host in the whole and of web1 alone in its part,
    and the `tg-certs p12` bundle read by openssl with its passphrase;
  - `tracegate record -H` records the app through the relay;
  - the installed tracegate-probes, as its unit runs it (a dynamic user
    with CAP_DAC_OVERRIDE alone), records sched events for a linux.ftrace
    config: counted in the trace by a decoder of the trace format here, and
    by trace_processor (select count(*) from sched) when PERFETTO_BIN
    names Perfetto's binaries;
  - two instances of the templates (tracegated@, tracegate-probes@,
    tracegate-relay@, tracegate-collector@: lab1 and lab2), each with its
    own sockets, config directory, logs and store, run beside the host's
    units: each records its own sched events, locally and through its own
    relay, and its collector stores a snapshot of its relay;
  - `apt-get purge` of all six leaves no file behind: every path under /etc,
    /usr, /var/lib, /var/log and /run that was not there before and is
    ours (in a package's dpkg -L list, or named after one) is a failure.
The machine is restored: daemons stopped and the packages purged at the
end, also on failure; a leftover install of an earlier run is purged at
the start, so the test can run again. The system users stay (Debian never
removes them), which a second run reuses.

The whole test runs in a mount namespace of its own with a fresh tmpfs on
/run: the daemons' /run/perfetto cannot meet another tracegated of this
machine, and the maintainer scripts see no running systemd (as here).

Environment: DEB_DIR (the packages), SRC_DIR, WORK (scratch directory),
PERFETTO_BIN (optional: trace_processor_shell's directory).
What users other than root run or write (the apps, the recordings) lives
in a directory of its own under /tmp: WORK may lie where only root can
enter (a checkout under /root).
Needs root. Exit 0: all good; 1: a failure, said on standard error.
"""
import glob
import grp
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import ctypes

PACKAGES = ["tracegate", "tracegated", "tracegate-relay", "tracegate-collector",
            "tracegate-perf", "libtracegate-agent1", "libtracegate-agent-dev"]
# Every program the packages ship, each with its man page.
PROGRAMS = ["tracegate", "tg-certs", "tracegate-emit", "tracegated",
            "tracegate-probes", "tracegate-relay", "tracegate-collector",
            "tracegate-perf"]
OURS = re.compile(r"tracegate|perfetto|tg-certs")
SCANNED = ["/etc", "/usr", "/var/lib", "/var/log", "/run"]
# Trees that change with any dpkg run, whoever's files they list.
DPKG_STATE = ("/var/lib/dpkg/", "/var/lib/apt/", "/var/cache/", "/var/log/apt/")
UNITDIR = "/lib/systemd/system"
APP_EVENT = b"deb_installed_app_frame"
# DynamicUser= of tracegate-probes: a uid from systemd's dynamic range,
# one per unit instance.
DYNAMIC_UID = 61184
INSTANCES = ("lab1", "lab2")
# ProtectKernelTunables=yes: what it makes read-only that matters here.
KERNEL_TUNABLES = ("/proc/sys", "/sys")
FTRACE_CONFIG = """buffers { size_kb: 8192 fill_policy: RING_BUFFER }
data_sources { config { name: "linux.ftrace" ftrace_config {
  ftrace_events: "sched/sched_switch" ftrace_events: "sched/sched_waking" } } }
duration_ms: 2000
"""

WORK = os.environ.get("WORK") or tempfile.mkdtemp(prefix="deb_install.")
SHARED = None   # made in main(): /tmp/deb_install.shared.*, 0755
SRC_DIR = os.environ.get("SRC_DIR", os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
DEB_DIR = os.environ.get("DEB_DIR", os.path.join(SRC_DIR, "build", "deb"))


class Failure(Exception):
    pass


def say(msg):
    print("deb_install: " + msg, flush=True)


def run(argv, check=True, **kw):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=kw.pop("timeout", 300), **kw)
    if check and p.returncode != 0:
        raise Failure("%s exited %d:\n%s" % (" ".join(argv), p.returncode,
                                              p.stdout[-4000:]))
    return p


def installed(pkg):
    """Installed, or removed with its config files still there."""
    p = run(["dpkg-query", "-W", "-f=${Status}", pkg], check=False)
    return p.returncode == 0 and ("ok installed" in p.stdout or
                                  "config-files" in p.stdout)


def purge_all():
    present = [p for p in PACKAGES if installed(p)]
    if present:
        run(["apt-get", "purge", "-y", "-q"] + present,
            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    return present


def scan():
    paths = set()
    for top in SCANNED:
        for root, dirs, files in os.walk(top):
            if root.startswith(("/proc", "/sys")):
                continue
            for n in dirs + files:
                paths.add(os.path.join(root, n))
    return paths


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, pred, timeout=30.0, procs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for d in procs:
            d.check_alive()
        if pred():
            return
        time.sleep(0.1)
    raise Failure("timed out waiting for " + what)


def can_connect(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


# --- systemd units, as systemd would run them --------------------------------

def read_unit(name, instance=None):
    """{section: [(key, value)]}, continuation lines joined; %i replaced by
    |instance| (a template unit's instance name)."""
    sections, cur, pending = {}, None, ""
    with open(os.path.join(UNITDIR, name)) as f:
        for raw in f:
            line = pending + raw.rstrip("\n")
            pending = ""
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            s = line.strip()
            if not s or s[0] in "#;":
                continue
            if s.startswith("["):
                cur = sections.setdefault(s.strip("[]"), [])
            elif "=" in s:
                k, v = s.split("=", 1)
                if instance is not None:
                    v = v.replace("%i", instance)
                cur.append((k.strip(), v.strip()))
    return sections


def values(unit, section, key):
    return [v for k, v in unit.get(section, []) if k == key]


def words(unit, section, key):
    """The space-separated words of every |key| line; an empty assignment
    resets the list, as systemd's list settings do."""
    out = []
    for v in values(unit, section, key):
        out = out + v.split() if v else []
    return out


def one(unit, section, key, default=None):
    v = values(unit, section, key)
    return v[-1] if v else default


def unit_env(unit):
    env = {}
    for v in values(unit, "Service", "Environment"):
        for word in shlex.split(v):
            k, _, val = word.partition("=")
            env[k] = val
    for v in values(unit, "Service", "EnvironmentFile"):
        optional = v.startswith("-")
        path = v.lstrip("-")
        if not os.path.exists(path):
            if optional:
                continue
            raise Failure("EnvironmentFile %s missing" % path)
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line or line.startswith("#") or "=" not in line:
                    continue
                k, _, val = line.partition("=")
                env[k.strip()] = " ".join(shlex.split(val))
    return env


def exec_argv(unit, env):
    """ExecStart= as systemd expands it: ${VAR} in place, $VAR split."""
    argv = []
    for word in shlex.split(one(unit, "Service", "ExecStart")):
        m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if m:
            argv += env.get(m.group(1), "").split()
            continue
        argv.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                           lambda m: env.get(m.group(1), ""), word))
    return argv


def condition_holds(unit):
    return all(os.path.exists(p) for p in
               values(unit, "Unit", "ConditionPathExists"))


def caps_of(unit, key):
    """setpriv's spelling of a capability list setting: "-all,+dac_override"."""
    return ",".join(["-all"] + ["+" + c.lower()[4:] for c in
                                words(unit, "Service", key)])


def sandbox_spec(unit):
    """The unit's file-system sandbox, as --sandbox applies it: paths
    whose "-" prefix says they may be missing lose it, missing ones go."""
    def paths(key):
        out = []
        for p in words(unit, "Service", key):
            optional = p.startswith("-")
            p = p.lstrip("-+")
            if os.path.exists(p):
                out.append(p)
            elif not optional:
                raise Failure("%s=%s: no such path (systemd would refuse to "
                              "start the unit)" % (key, p))
        return out
    ro = paths("ReadOnlyPaths")
    if one(unit, "Service", "ProtectKernelTunables") == "yes":
        ro += list(KERNEL_TUNABLES)
    return {"ro": ro, "rw": paths("ReadWritePaths"),
            "hidden": paths("InaccessiblePaths")}


def ensure_wanted_mounts(unit):
    """What systemd would have mounted for the unit: tracefs, when it wants
    sys-kernel-tracing.mount (sysinit.target wants it too, on Debian)."""
    wanted = words(unit, "Unit", "Wants") + words(unit, "Unit", "Requires")
    if "sys-kernel-tracing.mount" not in wanted:
        return
    if os.path.isdir("/sys/kernel/tracing/instances"):
        return
    run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"])


class Daemon:
    def __init__(self, name, instance=None, dynamic_uid=DYNAMIC_UID):
        self.name = name if instance is None else "%s@%s" % (name, instance)
        self.unit = read_unit(name + (".service" if instance is None
                                      else "@.service"), instance)
        self.dynamic_uid = dynamic_uid
        self.proc = None

    def start(self):
        u = self.unit
        if not condition_holds(u):
            raise Failure("%s: ConditionPathExists= does not hold" % self.name)
        if one(u, "Service", "DynamicUser") == "yes":
            uid = gid = self.dynamic_uid
        else:
            uid = pwd.getpwnam(one(u, "Service", "User")).pw_uid
            gid = grp.getgrnam(one(u, "Service", "Group")).gr_gid
        groups = [grp.getgrnam(g).gr_gid for g in
                  words(u, "Service", "SupplementaryGroups")]
        for key, top in (("RuntimeDirectory", "/run"), ("StateDirectory", "/var/lib"),
                         ("LogsDirectory", "/var/log")):
            for d in values(u, "Service", key):
                path = os.path.join(top, d)
                os.makedirs(path, exist_ok=True)
                os.chmod(path, int(one(u, "Service", key + "Mode", "0755"), 8))
                os.chown(path, uid, gid)
        ensure_wanted_mounts(u)
        argv = exec_argv(u, unit_env(u))
        if one(u, "Service", "NoNewPrivileges") != "yes":
            raise Failure("%s: NoNewPrivileges= is not yes" % self.name)
        priv = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid,
                "--groups=" + ",".join(map(str, groups)) if groups
                else "--clear-groups",
                "--inh-caps=" + caps_of(u, "AmbientCapabilities"),
                "--ambient-caps=" + caps_of(u, "AmbientCapabilities"),
                "--bounding-set=" + caps_of(u, "CapabilityBoundingSet"),
                "--no-new-privs"]
        # A mount namespace of its own, slave to ours (a later mount, as of
        # tracefs, reaches it), where --sandbox applies the unit's paths.
        sandbox = ["unshare", "--mount", "--propagation", "slave",
                   sys.executable, os.path.abspath(__file__), "--sandbox",
                   json.dumps(sandbox_spec(u)), "--"]
        umask = int(one(u, "Service", "UMask", "0022"), 8)
        self.log = open(os.path.join(WORK, self.name + ".log"), "w")
        say("start %s: %s" % (self.name, " ".join(argv)))
        self.proc = subprocess.Popen(sandbox + priv + argv, stdout=self.log,
                                     stderr=subprocess.STDOUT, cwd="/",
                                     preexec_fn=lambda: os.umask(umask))

    def check_alive(self):
        if self.proc and self.proc.poll() is not None:
            raise Failure("%s exited %d; its log:\n%s" % (
                self.name, self.proc.returncode, self.tail()))

    def tail(self):
        with open(os.path.join(WORK, self.name + ".log")) as f:
            return f.read()[-4000:]

    def stop(self):
        """SIGTERM (the units' KillSignal=), SIGKILL after 20 s; then the
        RuntimeDirectory= goes, as systemd removes it."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise Failure("%s ignored SIGTERM for 20 s" % self.name)
        for d in values(self.unit, "Service", "RuntimeDirectory"):
            subprocess.run(["rm", "-rf", os.path.join("/run", d)])


# --- a unit's file-system sandbox, in its own mount namespace -----------------

MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC = 1, 32, 4096, 16384
# Flags a read-only bind remount must keep (the kernel refuses to clear a
# mount's nosuid, nodev, noexec or atime flags in a remount that omits them
# when they are locked; keeping them is right in any case).
KEEP = {"nosuid": 2, "nodev": 4, "noexec": 8, "noatime": 1024,
        "nodiratime": 2048, "relatime": 1 << 21}


def mount_points():
    """{mount point: its per-mount flags}, from /proc/self/mountinfo."""
    out = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = fields[4].replace("\\040", " ")
            flags = 0
            for o in fields[5].split(","):
                flags |= KEEP.get(o, 0)
            out[point] = flags
    return out


def under(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def sandbox_main(spec, argv):
    """As systemd sets up ReadWritePaths=, ReadOnlyPaths= (recursively: every
    mount below, but those below a read-write path) and InaccessiblePaths=,
    then execs |argv|."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                           ctypes.c_ulong, ctypes.c_char_p]

    def mount(src, target, fstype, flags, data=None):
        enc = (lambda x: x.encode() if x is not None else None)
        if libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)) != 0:
            e = ctypes.get_errno()
            sys.exit("sandbox: mount %s on %s: %s" % (src, target, os.strerror(e)))

    for p in spec["rw"] + spec["ro"]:
        if p not in mount_points():
            mount(p, p, None, MS_BIND | MS_REC)
    for top in spec["ro"]:
        for point, flags in mount_points().items():
            if not under(point, top) or any(under(point, w) and not
                                             under(top, w) for w in spec["rw"]):
                continue
            mount(None, point, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags)
    for p in spec["hidden"]:
        if os.path.isdir(p):
            mount("tmpfs", p, "tmpfs", MS_RDONLY, "mode=000")
        else:
            mount("/dev/null", p, None, MS_BIND)
    os.execvp(argv[0], argv)


# --- the scenario ---------------------------------------------------------------

def check_installed_layout():
    for u in ("tracegate", "tracegate-relay", "tracegate-collector"):
        pwd.getpwnam(u)
    wants = "/etc/systemd/system/multi-user.target.wants/"
    for unit in ("tracegated", "tracegate-probes", "tracegate-relay",
                 "tracegate-collector", "tracegate-perf"):
        if not os.path.islink(wants + unit + ".service"):
            raise Failure("%s.service is not enabled" % unit)
    for d, group in (("/etc/tracegate-relay", "tracegate-relay"),
                     ("/etc/tracegate-collector", "tracegate-collector")):
        st = os.stat(d)
        if (st.st_mode & 0o777, st.st_uid, st.st_gid) != \
                (0o750, 0, grp.getgrnam(group).gr_gid):
            raise Failure("%s: mode %o owner %d:%d, want 0750 root:%s" % (
                d, st.st_mode & 0o777, st.st_uid, st.st_gid, group))
    for prog in PROGRAMS:
        if not os.access("/usr/bin/" + prog, os.X_OK):
            raise Failure("/usr/bin/%s not installed" % prog)
        if not os.path.exists("/usr/share/man/man1/%s.1.gz" % prog):
            raise Failure("no man page for " + prog)
    say("layout: users, enabled units, private /etc dirs, programs and man pages")


def build_apps():
    """The app, built as a user of libtracegate-agent-dev builds it."""
    cflags = run(["pkg-config", "--cflags", "--libs", "tracegate-agent"]).stdout.split()
    app = os.path.join(SHARED, "traced_app")
    run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror",
         os.path.join(SRC_DIR, "tests/deb/traced_app.c"), "-o", app] + cflags)
    ldd = run(["ldd", app]).stdout
    if not re.search(r"libtracegate-agent\.so\.1 => (/usr)?/lib/[^ ]*/libtracegate-agent\.so\.1",
                     ldd):
        raise Failure("the app does not load the installed library:\n" + ldd)
    cm = os.path.join(WORK, "cmake")
    run(["cmake", "-S", os.path.join(SRC_DIR, "tests/deploy/outside_cmake"),
         "-B", cm, "-DOUTSIDE_APP_SOURCE=" +
         os.path.join(SRC_DIR, "tests/deb/traced_app.c"),
         "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror"])
    run(["cmake", "--build", cm])
    cache = open(os.path.join(cm, "CMakeCache.txt")).read()
    if not re.search(r"^tracegate-agent_DIR:PATH=/usr/lib/[^/]+/cmake/tracegate-agent$",
                     cache, re.M):
        raise Failure("find_package(tracegate-agent) did not find the installed package")
    say("app built with pkg-config (%s) and with find_package" % " ".join(cflags))
    app_cmake = os.path.join(SHARED, "outside_app_cmake")
    shutil.copy(os.path.join(cm, "outside_app_cmake"), app_cmake)
    return app, app_cmake


def start_app(app, name):
    """The app as an unprivileged user: the producer socket is 0666."""
    nobody = pwd.getpwnam("nobody")
    out = open(os.path.join(WORK, name + ".out"), "w+")
    p = subprocess.Popen(["setpriv", "--reuid=%d" % nobody.pw_uid,
                          "--regid=%d" % nobody.pw_gid, "--clear-groups", app,
                          "/run/perfetto/traced-producer.sock", "120"],
                         stdout=out, stderr=subprocess.STDOUT)

    def connected():
        if p.poll() is not None:
            out.seek(0)
            raise Failure("%s exited %d: %s" % (name, p.returncode, out.read()))
        out.seek(0)
        return "connected" in out.read()
    wait_for(name + " to connect", connected)
    return p, out


def stop_app(p, out, name):
    p.send_signal(signal.SIGTERM)
    rc = p.wait(20)
    out.seek(0)
    text = out.read()
    if rc != 0:
        raise Failure("%s exited %d: %s" % (name, rc, text))
    stats = json.loads(text.strip().splitlines()[-1])
    if stats["connects"] != 1 or stats["disconnects"] != 0:
        raise Failure("%s lost its connection to tracegated: %s" % (name, text))
    return stats


def record_local(tag):
    """`tracegate record` as a member of group tracegate, not root; a user
    outside the group is refused by the consumer socket's mode."""
    nobody = pwd.getpwnam("nobody")
    tg = grp.getgrnam("tracegate").gr_gid
    outsider = run(["setpriv", "--reuid=%d" % nobody.pw_uid,
                    "--regid=%d" % nobody.pw_gid, "--clear-groups",
                    "/usr/bin/tracegate", "query", "--socket",
                    "/run/perfetto/traced-consumer.sock"], check=False, timeout=30)
    if outsider.returncode != 1:
        raise Failure("a user outside group tracegate: tracegate query exited %d, "
                      "want 1 (refused):\n%s" % (outsider.returncode, outsider.stdout))
    outdir = shared_dir("rec-" + tag)
    trace = os.path.join(outdir, "trace.pftrace")
    run(["setpriv", "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid,
         "--groups=%d" % tg, "/usr/bin/tracegate", "record", "--socket",
         "/run/perfetto/traced-consumer.sock", "-t", "2s", "-o", trace,
         "track_event", "linux.sys_stats"], timeout=60)
    data = open(trace, "rb").read()
    if APP_EVENT not in data:
        raise Failure("the local recording (%d bytes) lacks the app's events" % len(data))
    return len(data)


def shared_dir(name):
    """A directory under SHARED that nobody may write into."""
    d = os.path.join(SHARED, name)
    os.makedirs(d)
    os.chmod(d, 0o777)
    return d


def pb_fields(buf):
    """(field number, wire type, value) of one protobuf message: an int for
    varints and fixed-width fields, bytes for length-delimited ones."""
    i, n = 0, len(buf)

    def varint():
        nonlocal i
        v, shift = 0, 0
        while True:
            if i >= n or shift > 63:
                raise Failure("trace: truncated varint at byte %d" % i)
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v
    while i < n:
        key = varint()
        field, wt = key >> 3, key & 7
        if wt == 0:
            yield field, wt, varint()
        elif wt == 1 or wt == 5:
            w = 8 if wt == 1 else 4
            if i + w > n:
                raise Failure("trace: truncated fixed field %d" % field)
            yield field, wt, int.from_bytes(buf[i:i + w], "little")
            i += w
        elif wt == 2:
            ln = varint()
            if i + ln > n:
                raise Failure("trace: field %d runs past its message" % field)
            yield field, wt, buf[i:i + ln]
            i += ln
        else:
            raise Failure("trace: wire type %d of field %d" % (wt, field))


def count_varints(buf):
    return sum(1 for b in buf if b < 0x80)


def count_sched(path):
    """(sched_switch, sched_waking) events of a trace: Trace.packet (1) ->
    TracePacket.ftrace_events (1) -> FtraceEventBundle: each event (2)
    with sched_switch (4) or sched_waking (20), and compact_sched (4):
    switch_timestamp (1) and waking_timestamp (7), packed or not."""
    switches = wakings = 0
    with open(path, "rb") as f:
        data = f.read()
    for field, wt, packet in pb_fields(data):
        if field != 1 or wt != 2:
            continue
        for pf, pwt, bundle in pb_fields(packet):
            if pf != 1 or pwt != 2:
                continue
            for bf, bwt, v in pb_fields(bundle):
                if bf == 2 and bwt == 2:
                    kinds = {f for f, _, _ in pb_fields(v)}
                    switches += 4 in kinds
                    wakings += 20 in kinds
                elif bf == 4 and bwt == 2:
                    for cf, cwt, cv in pb_fields(v):
                        k = (count_varints(cv) if cwt == 2 else 1)
                        if cf == 1:
                            switches += k
                        elif cf == 7:
                            wakings += k
    return switches, wakings


def tp_sched_rows(path):
    """select count(*) from sched, by Perfetto's trace_processor; None
    without PERFETTO_BIN."""
    return tp_count(path, "select count(*) as n from sched")


def tp_count(path, query):
    """The count |query| (one column, n) gives for a trace, by Perfetto's
    trace_processor; None without PERFETTO_BIN."""
    bin_dir = os.environ.get("PERFETTO_BIN")
    if not bin_dir:
        return None
    tp = os.path.join(bin_dir, "trace_processor_shell")
    p = run([tp, "-Q", query, path], timeout=120)
    rows = [ln.strip() for ln in p.stdout.splitlines()]
    if '"n"' not in rows or rows.index('"n"') + 1 >= len(rows):
        raise Failure("trace_processor printed no count:\n" + p.stdout[-2000:])
    return int(rows[rows.index('"n"') + 1])


def check_sched(trace, where):
    """The trace holds sched events of the probes; says how many."""
    switches, wakings = count_sched(trace)
    tp = tp_sched_rows(trace)
    if switches == 0 or tp == 0:
        raise Failure("%s: no sched events (sched_switch %d, sched_waking %d, "
                      "trace_processor's sched rows %s)" % (where, switches,
                                                             wakings, tp))
    say("%s: %d sched_switch and %d sched_waking events%s" % (
        where, switches, wakings,
        "" if tp is None else ", %d rows in trace_processor's sched table" % tp))


def record_ftrace(consumer_sock, tag):
    """A linux.ftrace session through |consumer_sock|, recorded by a member
    of group tracegate; the trace's path."""
    nobody = pwd.getpwnam("nobody")
    tg = grp.getgrnam("tracegate").gr_gid
    outdir = shared_dir("ftrace-" + tag)
    cfg = os.path.join(outdir, "ftrace.pbtxt")
    with open(cfg, "w") as f:
        f.write(FTRACE_CONFIG)
    os.chmod(cfg, 0o644)
    trace = os.path.join(outdir, "trace.pftrace")
    run(["setpriv", "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid,
         "--groups=%d" % tg, "/usr/bin/tracegate", "record", "--socket",
         consumer_sock, "-c", cfg, "--txt", "-o", trace], timeout=60)
    return trace


def has_data_source(consumer_sock, name):
    p = run(["/usr/bin/tracegate", "query", "--socket", consumer_sock, "--json"],
            check=False, timeout=30)
    if p.returncode != 0:
        return False
    state = json.loads(p.stdout).get("service_state", {})
    return any(d.get("ds_descriptor", {}).get("name") == name
               for d in state.get("data_sources", []))


def ftrace_recorded(pid):
    """The events each tracefs instance of the tracegate-probes of |pid|
    has recorded (still in its ring, or read), by instance directory."""
    got = {}
    for d in glob.glob("/sys/kernel/tracing/instances/tracegate-%d-*" % pid):
        n = 0
        for path in glob.glob(d + "/per_cpu/cpu*/stats"):
            try:
                for line in open(path):
                    key, _, value = line.partition(":")
                    if key in ("entries", "read events"):
                        n += int(value)
            except (OSError, ValueError):
                pass
        got[d] = n
    return got


def wait_for_rings_to_record(rings, daemons):
    """Waits until each of the |rings| sessions' tracefs instances holds
    kernel events. A ring's host reads "tracing" once its session is
    enabled, while the probes may still be setting its instance up: a
    snapshot taken then holds no sched event of it, at any speed."""
    probes = [d.proc.pid for d in daemons
              if d.name == "tracegate-probes" and d.proc]
    if len(probes) != 1:
        raise Failure("no one tracegate-probes running to record the rings: "
                      "%s" % [d.name for d in daemons])

    def recorded():
        got = ftrace_recorded(probes[0])
        return len(got) >= rings and all(n >= 64 for n in got.values())
    wait_for("the rings' ftrace instances to record events", recorded, 60,
             daemons)


def wait_for_probes(consumer_sock, daemons):
    wait_for("tracegate-probes' linux.ftrace on " + consumer_sock,
             lambda: has_data_source(consumer_sock, "linux.ftrace"),
             procs=daemons)


def install(src, dst, mode, group="root"):
    with open(src, "rb") as f:
        data = f.read()
    with open(dst, "wb") as f:
        f.write(data)
    os.chmod(dst, mode)
    os.chown(dst, 0, grp.getgrnam(group).gr_gid)


def move_relay(port):
    """The host's relay on |port| of loopback instead of 7467: the
    operator's way to move the listener, the env file the units read."""
    env = "/etc/tracegate/tracegate.env"
    text = open(env).read()
    text = re.sub(r"^TRACEGATE_RELAY_LISTEN=.*$",
                  "TRACEGATE_RELAY_LISTEN=127.0.0.1:%d" % port, text, flags=re.M)
    open(env, "w").write(text)


def configure_relay_instance(ca, inst, port):
    """What an operator does for tracegate-relay@INST (docs/operations.md):
    its own directory under /etc/tracegate-relay and its own port."""
    d = "/etc/tracegate-relay/" + inst
    os.mkdir(d)
    os.chmod(d, 0o750)
    os.chown(d, 0, grp.getgrnam("tracegate-relay").gr_gid)
    install(os.path.join(ca, SERVER_NAME + ".pem"), d + "/relay.pem", 0o644)
    install(os.path.join(ca, SERVER_NAME + ".key"), d + "/relay.key", 0o640,
            "tracegate-relay")
    install(os.path.join(ca, "ca.pem"), d + "/ca.pem", 0o644)
    install(os.path.join(ca, "crl.pem"), d + "/crl.pem", 0o644)
    install(os.path.join(ca, "authz"), d + "/authz", 0o640, "tracegate-relay")
    with open("/etc/tracegate/%s.env" % inst, "w") as f:
        f.write("TRACEGATE_RELAY_LISTEN=127.0.0.1:%d\n" % port)


def remove_operator_files():
    """The instances' option files and collector configs the test wrote as
    an operator: no package owns them, so purge leaves them, as it leaves
    any operator's files. (Purge removes the certificates, keys and authz
    an instance's relay or collector reads by name, as the host's, and
    their emptied directories.)"""
    for inst in INSTANCES:
        paths = ["/etc/tracegate/%s.env" % inst] + [
            "/etc/tracegate-collector/%s/%s" % (inst, n)
            for n in ("collector.conf", "hosts", "flight.pbtxt")]
        for path in paths:
            if os.path.exists(path):
                os.remove(path)


def instances(ca, daemons):
    """Two instances of the templates beside the host's units: each records
    its own sched events, locally and through its own relay."""
    ports = {}
    for k, inst in enumerate(INSTANCES):
        svc = Daemon("tracegated", inst)
        daemons.append(svc)
        svc.start()
        sock = "/run/tracegate-%s/traced-consumer.sock" % inst
        wait_for(inst + "'s sockets", lambda: all(os.path.exists(
            "/run/tracegate-%s/traced-%s.sock" % (inst, s))
            for s in ("producer", "consumer")), procs=daemons)
        probes = Daemon("tracegate-probes", inst, DYNAMIC_UID + 1 + k)
        daemons.append(probes)
        probes.start()
        ports[inst] = free_port()
        configure_relay_instance(ca, inst, ports[inst])
        relay = Daemon("tracegate-relay", inst)
        daemons.append(relay)
        relay.start()
        wait_for(inst + "'s relay port", lambda: can_connect(ports[inst]),
                 procs=daemons)
        wait_for_probes(sock, daemons)
        http_port = free_port()
        configure_collector(ca, ports[inst], http_port, inst)
        coll = Daemon("tracegate-collector", inst)
        daemons.append(coll)
        coll.start()
        wait_for(inst + "'s collector", lambda: can_connect(http_port),
                 procs=daemons)
        snap_id, files = collector_snapshot(
            http_port, ports[inst], daemons,
            "/var/lib/tracegate-collector-" + inst, want_app=False)
        say("tracegate-collector@%s: snapshot %s of relay@%s stored: %s" % (
            inst, snap_id, inst, ", ".join(files)))
    for inst in INSTANCES:
        sock = "/run/tracegate-%s/traced-consumer.sock" % inst
        check_sched(record_ftrace(sock, inst), "instance %s, locally" % inst)
        cfg = os.path.join(SHARED, "ftrace-" + inst, "ftrace.pbtxt")
        check_sched(record_remote(ca, ports[inst], "remote-" + inst, cfg),
                    "instance %s, through tracegate-relay@%s" % (inst, inst))
    for inst in INSTANCES:
        for name in ("tracegate-collector", "tracegate-relay",
                     "tracegate-probes", "tracegated"):
            d = next(x for x in daemons if x.name == "%s@%s" % (name, inst))
            d.stop()
            if d.proc.returncode != 0:
                raise Failure("%s exited %d on SIGTERM:\n%s" % (
                    d.name, d.proc.returncode, d.tail()))
            daemons.remove(d)


def record_remote(ca, port, tag="remote", config=None):
    """`tracegate record -H` through the relay on |port|: track_event (the
    app's events checked), or the config file |config|. The trace's path."""
    out = os.path.join(WORK, tag + ".pftrace")
    what = ["-c", config, "--txt"] if config else ["-t", "2s", "track_event"]
    p = run(["/usr/bin/tracegate", "record", "-H", "127.0.0.1:%d" % port,
             "--tls-server-name", SERVER_NAME,
             "--ca", os.path.join(ca, "ca.pem"),
             "--cert", os.path.join(ca, OPERATOR + ".pem"),
             "--key", os.path.join(ca, OPERATOR + ".key"),
             "--merge", "-o", out, "--summary-json", "-"] + what, timeout=60)
    if not config and APP_EVENT not in open(out, "rb").read():
        raise Failure("the recording through the relay lacks the app's events:\n"
                      + p.stdout)
    return out


def configure_collector(ca, relay_port, http_port, inst):
    """An instance of tracegate-collector@ as an operator makes one
    (docs/operations.md): its own directory under /etc/tracegate-collector
    with the packaged config (plain HTTP on loopback), its own store and
    port."""
    d = "/etc/tracegate-collector/" + inst
    os.mkdir(d)
    os.chmod(d, 0o750)
    os.chown(d, 0, grp.getgrnam("tracegate-collector").gr_gid)
    for n in ("collector.conf", "hosts", "flight.pbtxt"):
        install("/usr/share/doc/tracegate/examples/collector/" + n,
                os.path.join(d, n), 0o644)
    install(os.path.join(ca, "tracegate-collector.pem"), d + "/collector.pem", 0o644)
    install(os.path.join(ca, "tracegate-collector.key"), d + "/collector.key", 0o640,
            "tracegate-collector")
    install(os.path.join(ca, "ca.pem"), d + "/ca.pem", 0o644)
    with open(d + "/hosts", "a") as f:
        f.write("127.0.0.1:%d name=%s\n" % (relay_port, SERVER_NAME))
    conf = open(d + "/collector.conf").read()
    conf = re.sub(r"^listen = .*$", "listen = 127.0.0.1:%d" % http_port, conf,
                  flags=re.M)
    conf = re.sub(r"^store = .*$", "store = /var/lib/tracegate-collector-"
                  + inst, conf, flags=re.M)
    open(d + "/collector.conf", "w").write(conf)


def packet_kinds(path):
    """The TracePacket fields (numbers) present in a trace."""
    kinds = set()
    with open(path, "rb") as f:
        for field, wt, packet in pb_fields(f.read()):
            if field == 1 and wt == 2:
                kinds |= {pf for pf, _, _ in pb_fields(packet)}
    return kinds


def collector_snapshot(http_port, relay_port, daemons,
                       store="/var/lib/tracegate-collector", want_app=True):
    api = "http://127.0.0.1:%d/api/v1/hosts" % http_port

    def tracing():
        try:
            with urllib.request.urlopen(api, timeout=5) as r:
                hosts = json.load(r)["hosts"]
        except OSError:
            return False
        return len(hosts) == 1 and hosts[0]["state"] == "tracing"
    wait_for("the collector's ring on the relay to trace", tracing, 60, daemons)
    js = os.path.join(WORK, "snapshot-%d.json" % http_port)
    run(["/usr/bin/tracegate", "snapshot", "--collector",
         "127.0.0.1:%d" % http_port, "--reason", "deb_install", "--json", js,
         "--timeout", "60s"], timeout=90)
    snap = json.load(open(js))
    if snap["snapshot"]["reason"] != "deb_install" or \
            [h["host"] for h in snap["hosts"]] != ["127.0.0.1:%d" % relay_port]:
        raise Failure("the snapshot is not the one asked for, of the relay: %s"
                      % json.dumps(snap))
    return snap["snapshot"]["id"], check_store(store, want_app)


def check_store(store, want_app):
    """The store's snapshot files: the app's events when it ran, the
    probes' process tree in each; the files' names."""
    files = glob.glob(store + "/snapshots/*.pftrace")
    if not files:
        raise Failure("no snapshot file in %s/snapshots" % store)
    if want_app and not any(APP_EVENT in open(f, "rb").read() for f in files):
        raise Failure("the collector's snapshot lacks the app's events")
    # The flight config's linux.process_stats scans every process as it
    # starts, before any snapshot's flush: its process_tree (field 2).
    if not all(2 in packet_kinds(f) for f in files):
        raise Failure("%s: a snapshot lacks the probes' process tree" % store)
    return files


# --- docs/collector.md's first day, as written ------------------------------

FIRST_DAY = "From apt-get install to a snapshot in the UI"
# The names the section's commands give.
SERVER_NAME = "localhost"
OPERATOR = "alice"
LABEL = "web1"
# A second inventory line for the same relay (another ring on it, another
# host of the snapshot), so that one host's part has one host to leave out.
LABEL2 = "web2"
TRIGGER = "slow_request"


def first_day_blocks():
    """The ```sh blocks of the section, each a list of commands
    (continuation lines kept with theirs)."""
    with open(os.path.join(SRC_DIR, "docs", "collector.md")) as f:
        text = f.read()
    head = "\n## %s\n" % FIRST_DAY
    if head not in text:
        raise Failure("docs/collector.md has no section \"%s\"" % FIRST_DAY)
    start = text.index(head) + len(head)
    end = text.find("\n## ", start)
    blocks, cur, indent, pending = [], None, 0, ""
    for line in text[start:None if end < 0 else end].split("\n"):
        if cur is None:
            if line.strip() == "```sh":
                cur, indent = [], len(line) - len(line.lstrip())
            continue
        if line.strip() == "```":
            blocks.append(cur)
            cur = None
            continue
        line = line[indent:]
        if line.endswith("\\"):
            pending += line + "\n"
            continue
        cur.append(pending + line)
        pending = ""
    if len(blocks) < 6:
        raise Failure("docs/collector.md's \"%s\" has %d sh blocks" % (
            FIRST_DAY, len(blocks)))
    return blocks


class FirstDay:
    """Runs the section's commands in order, as root, from a directory of
    its own (HOME too, for ~/.config/tracegate/config): `make deb` is
    skipped (make deb-test made the packages), ./build/deb/ is DEB_DIR,
    ports 7467, 7468 and 7469 are free ones, and `systemctl start UNIT`
    starts the unit as it says (Daemon), then waits until it serves.
    Every other command runs in bash with -e, -u and pipefail, so a
    command that fails (a check too) fails the test."""

    def __init__(self, daemons):
        self.daemons = daemons
        self.home = os.path.join(WORK, "first-day")
        os.makedirs(self.home)
        self.pki = os.path.join(self.home, "pki")
        self.relay_port, self.https_port, self.health_port = (
            free_port(), free_port(), free_port())
        self.ports = {"7467": self.relay_port, "7468": self.https_port,
                      "7469": self.health_port}
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": self.home,
                    "LANG": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive"}

    def install(self):
        """The section's first block: apt-get install of the four
        packages."""
        self.walk(0, 1)

    def walk(self, first=1, end=None):
        """The section's blocks [first, end)."""
        for n, block in enumerate(first_day_blocks()[first:end], first + 1):
            seg = []
            for cmd in block + [None]:
                unit = cmd and re.fullmatch(r"systemctl start (\S+)", cmd.strip())
                if cmd is None or unit:
                    if seg:
                        self.sh(n, seg)
                    seg = []
                    if unit:
                        self.start(unit.group(1))
                elif cmd.strip() != "make deb":
                    seg.append(self.adapt(cmd))

    def adapt(self, cmd):
        cmd = cmd.replace("./build/deb/", DEB_DIR.rstrip("/") + "/")
        return re.sub(r"\b(746[789])\b", lambda m: str(self.ports[m.group(1)]), cmd)

    def sh(self, n, lines):
        script = "\n".join(lines)
        p = run(["bash", "-euo", "pipefail", "-c", script], cwd=self.home,
                env=self.env, stdin=subprocess.DEVNULL, timeout=300, check=False)
        if p.returncode != 0:
            raise Failure("first day, block %d: exited %d:\n%s\n--- output:\n%s" % (
                n, p.returncode, script, p.stdout[-4000:]))
        out = p.stdout.strip()
        say("first day, block %d: ok%s" % (n, (":\n  " + out.replace("\n", "\n  "))
                                           if out and len(out) < 2000 else ""))

    def start(self, name):
        d = Daemon(name)
        if name == "tracegate-collector":
            # The second line, as an operator adds a host: the same relay
            # by its address.
            with open("/etc/tracegate-collector/hosts", "a") as f:
                f.write("127.0.0.1:%d name=%s label=%s\n" % (
                    self.relay_port, SERVER_NAME, LABEL2))
        self.daemons.append(d)
        d.start()
        if name == "tracegate-relay":
            wait_for("the relay's port", lambda: can_connect(self.relay_port),
                     procs=self.daemons)
        elif name == "tracegate-collector":
            wait_for("the collector's HTTPS port",
                     lambda: can_connect(self.https_port), procs=self.daemons)

            def tracing():
                try:
                    hosts = self.api("/api/v1/hosts")["hosts"]
                except OSError:
                    return False
                return len(hosts) == 2 and all(h["state"] == "tracing"
                                               for h in hosts)
            wait_for("the collector's rings to trace", tracing, 60, self.daemons)
            wait_for_rings_to_record(2, self.daemons)
        else:
            raise Failure("first day: no readiness known for " + name)

    def context(self, with_cert=True):
        ctx = ssl.create_default_context(cafile=os.path.join(self.pki, "ca.pem"))
        if with_cert:
            ctx.load_cert_chain(os.path.join(self.pki, OPERATOR + ".pem"),
                                os.path.join(self.pki, OPERATOR + ".key"))
        return ctx

    def api(self, path):
        url = "https://%s:%d%s" % (SERVER_NAME, self.https_port, path)
        with urllib.request.urlopen(url, context=self.context(), timeout=10) as r:
            return json.load(r)

    def check(self):
        """What the section says each step shows, read as JSON and
        traces."""
        hosts = self.api("/api/v1/hosts")["hosts"]
        names = sorted(h["name"] for h in hosts)
        if names != [LABEL, LABEL2] or any(h["problems"] for h in hosts):
            raise Failure("/api/v1/hosts over HTTPS: want %s, no problems: %s"
                          % ([LABEL, LABEL2], json.dumps(hosts)))
        # A client without a certificate: refused by the HTTPS listener,
        # served /healthz (and nothing else) by health_listen.
        try:
            urllib.request.urlopen("https://%s:%d/healthz" % (
                SERVER_NAME, self.https_port), context=self.context(False),
                timeout=10).read()
            raise Failure("the HTTPS listener served a client without a certificate")
        except OSError:
            pass
        with urllib.request.urlopen("http://127.0.0.1:%d/healthz" %
                                    self.health_port, timeout=10) as r:
            if json.load(r) != {"status": "ok"}:
                raise Failure("health_listen: /healthz is not ok")
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/api/v1/hosts" %
                                   self.health_port, timeout=10).read()
            raise Failure("health_listen served /api/v1/hosts")
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise Failure("health_listen: /api/v1/hosts answered %d, want 404"
                              % e.code)

        snap_id = json.load(open(os.path.join(self.home, "snap.json")))["snapshot"]["id"]
        snap = self.api("/api/v1/snapshots/" + snap_id)
        got = sorted((h["name"], h["outcome"], json.dumps(h["problems"]))
                     for h in snap["hosts"])
        if snap["snapshot"]["state"] != "complete" or \
                got != [(LABEL, "ok", "[]"), (LABEL2, "ok", "[]")]:
            raise Failure("snapshot %s over HTTPS: want complete, %s and %s ok "
                          "with no problem: %s" % (snap_id, LABEL, LABEL2,
                                                   json.dumps(snap)))
        listed = [r for r in self.api("/api/v1/snapshots")["snapshots"]
                  if r["id"] == snap_id]
        if len(listed) != 1 or listed[0]["state"] != "complete":
            raise Failure("/api/v1/snapshots lists snapshot %s as %s, want it "
                          "complete" % (snap_id, json.dumps(listed)))
        # The app's trigger (tracegate trigger, the section's stand-in):
        # a snapshot of its own, stored complete in its time.
        def triggered():
            rows = self.api("/api/v1/snapshots?trigger=" + TRIGGER)["snapshots"]
            if any(r["state"] not in ("pending", "complete") for r in rows):
                raise Failure("the trigger's snapshots: %s" % json.dumps(rows))
            return rows and all(r["state"] == "complete" for r in rows)
        wait_for("the trigger's snapshot to be stored", triggered, 90, self.daemons)
        url = "https://%s:%d/" % (SERVER_NAME, self.https_port)
        with urllib.request.urlopen(url, context=self.context(), timeout=10) as r:
            if not r.headers.get("Content-Type", "").startswith("text/html"):
                raise Failure("GET / over HTTPS: Content-Type %s, want the page"
                              % r.headers.get("Content-Type"))
        say("first day: snapshot %s listed complete, hosts %s, no problem; "
            "the page served over HTTPS" % (snap_id, ", ".join(names)))

        p = run(["openssl", "pkcs12", "-in", os.path.join(self.pki, OPERATOR + ".p12"),
                 "-passin", "file:" + os.path.join(self.pki, OPERATOR + ".pass"),
                 "-nodes"], check=False)
        if p.returncode != 0 or "BEGIN CERTIFICATE" not in p.stdout or \
                "PRIVATE KEY" not in p.stdout:
            raise Failure("tg-certs p12: openssl cannot read the bundle with its "
                          "passphrase:\n" + p.stdout[-2000:])

        whole = os.path.join(self.home, "snapshot.pftrace")
        part = os.path.join(self.home, LABEL + ".pftrace")
        stored = "/var/lib/tracegate-collector/snapshots/%s.pftrace" % snap_id
        if open(whole, "rb").read() != open(stored, "rb").read():
            raise Failure("tracegate snapshot get: %s is not the stored %s"
                          % (whole, stored))
        check_sched(whole, "the first day's snapshot")
        check_sched(part, "the first day's snapshot, %s's part" % LABEL)
        named = "select count(*) as n from track where name = '%s'"
        for path, want in ((whole, (LABEL, LABEL2)), (part, (LABEL,))):
            for label in (LABEL, LABEL2):
                n = tp_count(path, named % label)
                if n is not None and (n > 0) != (label in want):
                    raise Failure("%s: %d tracks named %s in trace_processor, "
                                  "want %s" % (path, n, label,
                                               "some" if label in want else "none"))
        if tp_count(whole, named % LABEL) is not None:
            say("first day: trace_processor names %s and %s in the snapshot, "
                "%s alone in its part" % (LABEL, LABEL2, LABEL))
        return check_store("/var/lib/tracegate-collector", True)


def scenario(daemons, day):
    check_installed_layout()
    app, app_cmake = build_apps()

    svc = Daemon("tracegated")
    daemons.append(svc)
    svc.start()
    wait_for("tracegated's sockets", lambda: all(os.path.exists(
        "/run/perfetto/traced-%s.sock" % s) for s in ("producer", "consumer")),
        procs=daemons)
    probes = Daemon("tracegate-probes")
    daemons.append(probes)
    probes.start()

    # The CMake-built app connects and traces too; the pkg-config one runs
    # through every recording below.
    p2, o2 = start_app(app_cmake, "app_cmake")
    p1, o1 = start_app(app, "app")
    size = record_local("local")
    stop_app(p2, o2, "app_cmake")
    say("local recording of the installed app: %d bytes" % size)
    wait_for_probes("/run/perfetto/traced-consumer.sock", daemons)
    check_sched(record_ftrace("/run/perfetto/traced-consumer.sock", "host"),
                "the host's tracegate-probes")

    for unit in ("tracegate-relay", "tracegate-collector"):
        if condition_holds(Daemon(unit).unit):
            raise Failure("%s.service would start without a certificate" % unit)
    move_relay(day.relay_port)
    day.walk()
    files = day.check()
    say("first day walked: docs/collector.md's commands; stored: "
        + ", ".join(files))
    say("recording through the installed relay: %d bytes" %
        os.path.getsize(record_remote(day.pki, day.relay_port)))
    instances(day.pki, daemons)

    stats = stop_app(p1, o1, "app")
    say("app: %s" % json.dumps(stats))
    for d in reversed(daemons):
        d.stop()
        if d.proc.returncode != 0:
            raise Failure("%s exited %d on SIGTERM:\n%s" % (
                d.name, d.proc.returncode, d.tail()))
    say("every daemon stopped cleanly on SIGTERM")


def main():
    global SHARED
    if sys.argv[1:2] == ["--sandbox"] and sys.argv[3:4] == ["--"]:
        sandbox_main(json.loads(sys.argv[2]), sys.argv[4:])
    if os.geteuid() != 0:
        print("deb_install: FAILED: needs root (it installs packages)", file=sys.stderr)
        return 1
    if os.environ.get("TG_DEB_NAMESPACE") != "1":
        # Again, in a mount namespace of its own with a fresh /run.
        os.execvp("unshare", ["unshare", "--mount", "--propagation", "private",
                              "sh", "-c", "mount -t tmpfs -o mode=0755 tmpfs /run && "
                              "mkdir -m 1777 /run/lock && "
                              "TG_DEB_NAMESPACE=1 exec \"$0\" \"$@\"",
                              sys.executable] + sys.argv)
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    SHARED = tempfile.mkdtemp(prefix="deb_install.shared.")
    os.chmod(SHARED, 0o755)   # the apps run as nobody from here
    debs = []
    for pkg in PACKAGES:
        found = glob.glob(os.path.join(DEB_DIR, "%s_*.deb" % pkg))
        if len(found) != 1:
            print("deb_install: FAILED: want one %s_*.deb in %s (make deb), found %s"
                  % (pkg, DEB_DIR, found), file=sys.stderr)
            return 1
        debs += found

    left = purge_all()
    if left:
        say("purged an earlier run's packages: " + " ".join(left))
    before = scan()
    daemons = []
    status = 0
    lists = set()
    try:
        day = FirstDay(daemons)
        day.install()
        # The library and its -dev package, and the profiler's package, as
        # operations.md installs them.
        run(["apt-get", "install", "-y", "-q"] +
            [d for d in debs
             if os.path.basename(d).startswith(("libtracegate-agent",
                                                "tracegate-perf_"))],
            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        for pkg in PACKAGES:
            q = run(["dpkg-query", "-W", "-f=${Status}", pkg], check=False)
            if "ok installed" not in q.stdout:
                raise Failure("%s is not installed: %s" % (pkg, q.stdout))
        say("installed: " + " ".join(os.path.basename(d) for d in debs))
        for pkg in PACKAGES:
            lists |= set(run(["dpkg", "-L", pkg]).stdout.split("\n"))
        scenario(daemons, day)
    except (Failure, OSError, ValueError, KeyError,
            subprocess.TimeoutExpired) as e:
        print("deb_install: FAILED: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        for d in daemons:
            if d.proc:
                print("--- %s log:\n%s" % (d.name, d.tail()), file=sys.stderr)
        status = 1
    finally:
        for d in reversed(daemons):
            try:
                d.stop()
            except Failure as e:
                print("deb_install: FAILED: %s" % e, file=sys.stderr)
                status = 1
        try:
            remove_operator_files()
            purge_all()
        except (Failure, OSError) as e:
            print("deb_install: FAILED: purge: %s" % e, file=sys.stderr)
            return 1
        finally:
            shutil.rmtree(SHARED, ignore_errors=True)

    left = sorted(p for p in scan() - before
                  if not p.startswith(DPKG_STATE) and (p in lists or OURS.search(p)))
    if left:
        print("deb_install: FAILED: apt-get purge left:\n  " + "\n  ".join(left),
              file=sys.stderr)
        return 1
    say("purged: nothing of ours left under %s" % " ".join(SCANNED))
    if status == 0:
        shutil.rmtree(WORK, ignore_errors=True)
        say("ok")
    return status


if __name__ == "__main__":
    sys.exit(main())
