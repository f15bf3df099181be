#!/usr/bin/env python3
"""deb_install: the Debian packages of `make deb`, installed on this machine.

Installs the six packages with dpkg -i, then runs what they installed from
where they installed it. systemd is not PID 1 here, so each daemon starts
as its installed unit says: ExecStart= with the unit's Environment= and
EnvironmentFile=, as its User=/Group=/SupplementaryGroups= (setpriv), with
its RuntimeDirectory=, StateDirectory=, LogsDirectory= and UMask=, and only
if its ConditionPathExists= holds. Checked:
  - the four service units are enabled, the users exist,
    the relay's and the collector's /etc directories are private;
  - every program has a man page;
  - an app built against the installed -dev package, with pkg-config and
    with find_package(tracegate-agent), loads the installed library and
    traces into the installed tracegated; the installed `tracegate record`
    (as a member of group tracegate) gets its events, and a user outside
    the group cannot reach the consumer socket;
  - the relay does not start before it has a certificate; given certificates
    (made with the installed tg-certs, i.e. openssl) it starts from its
    installed unit and `tracegate record -H` records the app through it;
  - the collector starts from its installed config once given its
    certificate and inventory, its ring on the relay traces, and `tracegate
    snapshot` stores a complete snapshot in /var/lib/tracegate-collector;
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

Environment: DEB_DIR (the packages), SRC_DIR, WORK (scratch directory).
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
import subprocess
import sys
import tempfile
import time
import urllib.request

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
# DynamicUser= of tracegate-probes: a uid from systemd's dynamic range.
DYNAMIC_UID = 61184

WORK = os.environ.get("WORK") or tempfile.mkdtemp(prefix="deb_install.")
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

def read_unit(name):
    """{section: [(key, value)]}, continuation lines joined."""
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
                cur.append((k.strip(), v.strip()))
    return sections


def values(unit, section, key):
    return [v for k, v in unit.get(section, []) if k == key]


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


class Daemon:
    def __init__(self, name):
        self.name = name
        self.unit = read_unit(name + ".service")
        self.proc = None

    def start(self):
        u = self.unit
        if not condition_holds(u):
            raise Failure("%s: ConditionPathExists= does not hold" % self.name)
        if one(u, "Service", "DynamicUser") == "yes":
            uid = gid = DYNAMIC_UID
        else:
            uid = pwd.getpwnam(one(u, "Service", "User")).pw_uid
            gid = grp.getgrnam(one(u, "Service", "Group")).gr_gid
        groups = [grp.getgrnam(g).gr_gid for v in
                  values(u, "Service", "SupplementaryGroups") for g in v.split()]
        for key, top in (("RuntimeDirectory", "/run"), ("StateDirectory", "/var/lib"),
                         ("LogsDirectory", "/var/log")):
            for d in values(u, "Service", key):
                path = os.path.join(top, d)
                os.makedirs(path, exist_ok=True)
                os.chmod(path, int(one(u, "Service", key + "Mode", "0755"), 8))
                os.chown(path, uid, gid)
        argv = exec_argv(u, unit_env(u))
        priv = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid,
                "--groups=" + ",".join(map(str, groups)) if groups
                else "--clear-groups", "--inh-caps=-all", "--no-new-privs"]
        umask = int(one(u, "Service", "UMask", "0022"), 8)
        self.log = open(os.path.join(WORK, self.name + ".log"), "w")
        say("start %s: %s" % (self.name, " ".join(argv)))
        self.proc = subprocess.Popen(priv + argv, stdout=self.log,
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
    app = os.path.join(WORK, "traced_app")
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
    return app, os.path.join(cm, "outside_app_cmake")


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
    outdir = os.path.join(WORK, "rec-" + tag)
    os.makedirs(outdir)
    os.chmod(outdir, 0o777)
    trace = os.path.join(outdir, "trace.pftrace")
    run(["setpriv", "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid,
         "--groups=%d" % tg, "/usr/bin/tracegate", "record", "--socket",
         "/run/perfetto/traced-consumer.sock", "-t", "2s", "-o", trace,
         "track_event", "linux.sys_stats"], timeout=60)
    data = open(trace, "rb").read()
    if APP_EVENT not in data:
        raise Failure("the local recording (%d bytes) lacks the app's events" % len(data))
    return len(data)


def make_certs():
    ca = os.path.join(WORK, "ca")
    tgc = "/usr/bin/tg-certs"
    run([tgc, "ca", ca])
    run([tgc, "host", ca, "relay.test"])
    run([tgc, "client", ca, "deb-tester", "--role", "record"])
    run([tgc, "client", ca, "tracegate-collector", "--role", "record"])
    return ca


def install(src, dst, mode, group="root"):
    with open(src, "rb") as f:
        data = f.read()
    with open(dst, "wb") as f:
        f.write(data)
    os.chmod(dst, mode)
    os.chown(dst, 0, grp.getgrnam(group).gr_gid)


def configure_relay(ca, port):
    d = "/etc/tracegate-relay"
    install(os.path.join(ca, "relay.test.pem"), d + "/relay.pem", 0o644)
    install(os.path.join(ca, "relay.test.key"), d + "/relay.key", 0o640, "tracegate-relay")
    install(os.path.join(ca, "ca.pem"), d + "/ca.pem", 0o644)
    install(os.path.join(ca, "crl.pem"), d + "/crl.pem", 0o644)
    install(os.path.join(ca, "authz"), d + "/authz", 0o640, "tracegate-relay")
    # The operator's way to move the listener: the env file the units read.
    env = "/etc/tracegate/tracegate.env"
    text = open(env).read()
    text = re.sub(r"^TRACEGATE_RELAY_LISTEN=.*$",
                  "TRACEGATE_RELAY_LISTEN=127.0.0.1:%d" % port, text, flags=re.M)
    open(env, "w").write(text)


def record_remote(ca, port):
    out = os.path.join(WORK, "remote.pftrace")
    p = run(["/usr/bin/tracegate", "record", "-H", "127.0.0.1:%d" % port,
             "--tls-server-name", "relay.test",
             "--ca", os.path.join(ca, "ca.pem"),
             "--cert", os.path.join(ca, "deb-tester.pem"),
             "--key", os.path.join(ca, "deb-tester.key"),
             "-t", "2s", "--merge", "-o", out, "--summary-json", "-",
             "track_event"], timeout=60)
    if APP_EVENT not in open(out, "rb").read():
        raise Failure("the recording through the relay lacks the app's events:\n"
                      + p.stdout)
    return os.path.getsize(out)


def configure_collector(ca, relay_port, http_port):
    d = "/etc/tracegate-collector"
    install(os.path.join(ca, "tracegate-collector.pem"), d + "/collector.pem", 0o644)
    install(os.path.join(ca, "tracegate-collector.key"), d + "/collector.key", 0o640,
            "tracegate-collector")
    install(os.path.join(ca, "ca.pem"), d + "/ca.pem", 0o644)
    with open(d + "/hosts", "a") as f:
        f.write("127.0.0.1:%d name=relay.test\n" % relay_port)
    conf = open(d + "/collector.conf").read()
    conf = re.sub(r"^listen = .*$", "listen = 127.0.0.1:%d" % http_port, conf,
                  flags=re.M)
    open(d + "/collector.conf", "w").write(conf)


def collector_snapshot(http_port, relay_port, daemons):
    api = "http://127.0.0.1:%d/api/v1/hosts" % http_port

    def tracing():
        try:
            with urllib.request.urlopen(api, timeout=5) as r:
                hosts = json.load(r)["hosts"]
        except OSError:
            return False
        return len(hosts) == 1 and hosts[0]["state"] == "tracing"
    wait_for("the collector's ring on the relay to trace", tracing, 60, daemons)
    js = os.path.join(WORK, "snapshot.json")
    run(["/usr/bin/tracegate", "snapshot", "--collector",
         "127.0.0.1:%d" % http_port, "--reason", "deb_install", "--json", js,
         "--timeout", "60s"], timeout=90)
    snap = json.load(open(js))
    if snap["snapshot"]["reason"] != "deb_install" or \
            [h["host"] for h in snap["hosts"]] != ["127.0.0.1:%d" % relay_port]:
        raise Failure("the snapshot is not the one asked for, of the relay: %s"
                      % json.dumps(snap))
    files = glob.glob("/var/lib/tracegate-collector/snapshots/*")
    if not files:
        raise Failure("no snapshot file in /var/lib/tracegate-collector/snapshots")
    if not any(APP_EVENT in open(f, "rb").read() for f in files):
        raise Failure("the collector's snapshot lacks the app's events")
    return snap["snapshot"]["id"], files


def scenario(daemons):
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

    relay = Daemon("tracegate-relay")
    if condition_holds(relay.unit):
        raise Failure("tracegate-relay.service would start without a certificate")
    ca = make_certs()
    relay_port = free_port()
    configure_relay(ca, relay_port)
    daemons.append(relay)
    relay.start()
    wait_for("the relay's port", lambda: can_connect(relay_port), procs=daemons)
    say("recording through the installed relay: %d bytes" %
        record_remote(ca, relay_port))

    coll = Daemon("tracegate-collector")
    if condition_holds(coll.unit):
        raise Failure("tracegate-collector.service would start without a certificate")
    http_port = free_port()
    configure_collector(ca, relay_port, http_port)
    daemons.append(coll)
    coll.start()
    wait_for("the collector's HTTP port", lambda: can_connect(http_port),
             procs=daemons)
    snap_id, files = collector_snapshot(http_port, relay_port, daemons)
    say("collector snapshot %s stored: %s" % (snap_id, ", ".join(files)))

    stats = stop_app(p1, o1, "app")
    say("app: %s" % json.dumps(stats))
    for d in reversed(daemons):
        d.stop()
        if d.proc.returncode != 0:
            raise Failure("%s exited %d on SIGTERM:\n%s" % (
                d.name, d.proc.returncode, d.tail()))
    say("every daemon stopped cleanly on SIGTERM")


def main():
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
    os.chmod(WORK, 0o755)   # the apps run as nobody from here
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
        run(["dpkg", "-i"] + debs)
        say("installed: " + " ".join(os.path.basename(d) for d in debs))
        for pkg in PACKAGES:
            lists |= set(run(["dpkg", "-L", pkg]).stdout.split("\n"))
        scenario(daemons)
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
            purge_all()
        except Failure as e:
            print("deb_install: FAILED: purge: %s" % e, file=sys.stderr)
            return 1

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
