#!/usr/bin/env python3
"""A person's browser on an HTTPS collector: headless Chromium with a client
certificate from a `tg-certs p12` bundle, set up as docs/collector.md tells
a person to (an NSS database, the bundle imported with pk12util, the CA
trusted for servers, the AutoSelectCertificateForUrls policy).

Drives Chromium through chromedriver with browser_check.py's harness
(ChromeDriver, Session: W3C WebDriver over the standard library).

What it leaves behind: nothing outside --dir. Chromium on Linux reads its
client certificates from $HOME/.pki/nssdb, so HOME is a directory under
--dir for chromedriver and Chromium. Its policies come only from
/etc/chromium/policies/managed (no flag or environment variable sets
them), so the script runs in a mount namespace of its own (private
propagation) in which a copy of /etc/chromium with the policy file is
bind-mounted over /etc/chromium: no other process sees it, and it is gone
when the script's processes end, whatever way they end. Needs root (or
CAP_SYS_ADMIN) for the namespace.

Checks, each a separate assertion that names what differed:
  1. page: https://127.0.0.1:PORT/ loads with the certificate the policy
     picked (no prompt: there is no one to answer it), app.js runs
     (body[data-loaded=1]), #snapshots lists --snapshot as "complete".
  2. pin: a POST from the page (fetch, which sends the page's Origin:
     the collector's CSRF check over HTTPS) pins the snapshot: 200, and
     the API's row says pinned.
  3. console: no error but the favicon's 404.

Exit 0: every check passed; 1: a check failed; 2: a usage or setup error.

By hand (as root): browser_tls_check.py --url https://127.0.0.1:7468 \\
    --p12 pki/me.p12 --pass-file pw --issuer-cn 'tracegate CA pki' \\
    --snapshot ID
"""
import argparse
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import browser_check as bc  # noqa: E402  (the harness, next to this file)

CLONE_NEWNS = 0x00020000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
POLICY_DIR = "/etc/chromium"
TOOL_TIMEOUT_S = 30


def run(argv):
    """An NSS tool; its output only on failure."""
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=TOOL_TIMEOUT_S)
    if r.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(argv), r.returncode,
                                                 r.stdout.decode(errors="replace")))


def nss_db(home, p12, pass_file, issuer_cn):
    """$HOME/.pki/nssdb as a person makes it: an empty database, the
    bundle imported (certificate, key and CA), the CA trusted to sign
    servers' certificates (an import trusts it for nothing)."""
    db = os.path.join(home, ".pki", "nssdb")
    os.makedirs(db, mode=0o700)
    run(["certutil", "-N", "-d", "sql:" + db, "--empty-password"])
    run(["pk12util", "-d", "sql:" + db, "-i", p12, "-w", pass_file])
    run(["certutil", "-M", "-d", "sql:" + db, "-n", issuer_cn, "-t", "C,,"])


def policy_dir(scratch, origin, issuer_cn):
    """A copy of /etc/chromium with policies/managed/tracegate.json: the
    certificate of |issuer_cn|'s chosen for |origin| without asking."""
    etc = os.path.join(scratch, "etc-chromium")
    shutil.copytree(POLICY_DIR, etc, symlinks=True)
    managed = os.path.join(etc, "policies", "managed")
    os.makedirs(managed, exist_ok=True)
    rule = {"pattern": origin, "filter": {"ISSUER": {"CN": issuer_cn}}}
    with open(os.path.join(managed, "tracegate.json"), "w") as f:
        json.dump({"AutoSelectCertificateForUrls": [json.dumps(rule)]}, f)
    return etc


def private_mount(etc):
    """This process (single-threaded still) and its children get a mount
    namespace in which |etc| is /etc/chromium."""
    libc = ctypes.CDLL(None, use_errno=True)

    def ok(rv, what):
        if rv != 0:
            e = ctypes.get_errno()
            raise RuntimeError("%s: %s" % (what, os.strerror(e)))
    ok(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS) (root is needed)")
    ok(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None),
       "making / private in the new namespace")
    ok(libc.mount(etc.encode(), POLICY_DIR.encode(), None, MS_BIND, None),
       "bind-mounting the policy directory over " + POLICY_DIR)


def page_state(s):
    """Where the window is and what it shows: a failed TLS handshake is
    Chromium's error page, whose text names the error (net::ERR_...)."""
    return s.js("return [document.documentURI, document.body ?"
                " document.body.innerText.slice(0, 300) : ''];")


def check_page(s, args):
    s.get(args.url + "/")
    try:
        bc.wait_for("page: body[data-loaded=1] over HTTPS",
                    lambda: s.js("return !!document.body &&"
                                 " document.body.dataset.loaded === '1';"))
    except bc.CheckFailed as e:
        raise bc.CheckFailed("%s; the window shows %r" % (e, page_state(s))) from None
    proto = s.js("return location.protocol;")
    bc.check(proto == "https:", "page: location.protocol is %r" % proto)
    rows = bc.wait_for("page: #snapshots lists %s" % args.snapshot,
                       lambda: [r for r in s.js(bc.TABLE_JS, "#snapshots") or []
                                if r["data-id"] == args.snapshot])
    bc.check(len(rows) == 1, "page: #snapshots lists %s %d times" % (args.snapshot, len(rows)))
    bc.check(rows[0].get("state") == "complete",
             "page: snapshot %s's state is %r" % (args.snapshot, rows[0].get("state")))
    return "page: %s/ over HTTPS with the policy's certificate, snapshot %s complete" % (
        args.url, args.snapshot)


PIN_JS = """
const [id] = arguments;
const post = await fetch('/api/v1/snapshots/' + id + '/pin?pinned=1', {method: 'POST'});
const got = await fetch('/api/v1/snapshots/' + id);
const row = await got.json();
return [post.status, got.status, (row.snapshot || row).pinned];
"""


def check_pin(s, args):
    # WebDriver's execute waits for the promise an async body returns.
    post, get, pinned = s.js("return (async () => {%s})(...arguments);" % PIN_JS,
                             args.snapshot)
    bc.check(post == 200, "pin: POST from the page answered %r (403: the Origin "
             "check refused the page's own origin)" % post)
    bc.check(get == 200 and pinned is True,
             "pin: GET answered %r, pinned %r" % (get, pinned))
    return "pin: the page's POST (with its Origin) pinned %s" % args.snapshot


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    ap.add_argument("--url", required=True, help="https://127.0.0.1:PORT")
    ap.add_argument("--p12", required=True, help="the tg-certs p12 bundle")
    ap.add_argument("--pass-file", required=True, help="its passphrase")
    ap.add_argument("--issuer-cn", required=True, help="the CA's CN")
    ap.add_argument("--snapshot", required=True, help="a complete snapshot's id")
    ap.add_argument("--dir", help="scratch directory (default: a new one, removed)")
    args = ap.parse_args()
    args.url = args.url.rstrip("/")
    for exe in (args.chromium, args.chromedriver, shutil.which("pk12util") or "pk12util"):
        if not os.access(exe, os.X_OK):
            print("browser_tls_check: %s is not installed: run deploy/deps.sh" % exe,
                  file=sys.stderr)
            return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))

    scratch = args.dir or tempfile.mkdtemp(prefix="tg-browser-tls-")
    driver = session = None
    try:
        home = os.path.join(scratch, "home")
        nss_db(home, os.path.abspath(args.p12), os.path.abspath(args.pass_file),
               args.issuer_cn)
        private_mount(policy_dir(scratch, args.url, args.issuer_cn))
        os.environ["HOME"] = home
        profile = os.path.join(scratch, "profile")
        downloads = os.path.join(scratch, "downloads")
        os.makedirs(profile)
        os.makedirs(downloads)
        driver = bc.ChromeDriver(args.chromedriver, os.path.join(scratch, "chromedriver.log"))
        session = bc.Session(driver.url, args.chromium, profile, downloads)
        bc.passed(check_page(session, args))
        bc.passed(check_pin(session, args))
        bc.passed(bc.check_console(session))
    except bc.CheckFailed as e:
        print("browser_tls_check: FAILED: %s" % e, file=sys.stderr)
        if session:
            for entry in session.browser_log():
                print("browser_tls_check: console: %s %s" % (entry.get("level"),
                                                            entry.get("message")),
                      file=sys.stderr)
        return 1
    except (RuntimeError, bc.WebDriverError, OSError, ValueError, KeyError,
            subprocess.TimeoutExpired) as e:
        print("browser_tls_check: ERROR: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        return 2
    finally:
        if session:
            try:
                session.delete()
            except (bc.WebDriverError, OSError) as e:
                print("browser_tls_check: ending the session: %s" % e, file=sys.stderr)
        if driver:
            driver.stop()
        if not args.dir:
            shutil.rmtree(scratch, ignore_errors=True)
    print("browser_tls_check: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
