#!/usr/bin/env python3
"""Writes a program's man page (section 1) from its --help text.

    docs/man/gen-man.py PROGRAM VERSION OUT [COMMAND...]

runs COMMAND (default: PROGRAM) with --help and turns the text into roff:
the usage lines become SYNOPSIS, a block whose first line ends with ':'
and whose items are indented ("options:", "commands:") becomes a list
(OPTIONS or COMMANDS), the other paragraphs DESCRIPTION. NAME, FILES and
SEE ALSO come from the table below, the one place a page says more than
its --help. The build runs this (deploy/CMakeLists.txt), so a page never
lags its program's flags. tracegate(1) itself is written by hand
(docs/tracegate.1): its subcommands need more than one --help.
"""
import os
import re
import subprocess
import sys

# Program -> (one-line summary for NAME, FILES entries, SEE ALSO pages).
PAGES = {
    "tracegated": (
        "Perfetto-compatible tracing service for one host",
        [("/run/perfetto/traced-producer.sock",
          "producer socket of the systemd unit (mode 0666)"),
         ("/run/perfetto/traced-consumer.sock",
          "consumer socket of the systemd unit (mode 0660, group tracegate)"),
         ("/etc/tracegate/tracegate.env",
          "TRACEGATED_OPTS: flags the unit adds")],
        ["tracegate(1)", "tracegate-probes(1)", "tracegate-relay(1)"]),
    "tracegate-probes": (
        "system producer for tracegated (/proc, ftrace)",
        [("/etc/tracegate/tracegate.env",
          "TRACEGATE_PROBES_OPTS: flags the unit adds")],
        ["tracegated(1)", "tracegate(1)"]),
    "tracegate-otlp": (
        "OpenTelemetry (OTLP/HTTP) trace receiver for tracegated",
        [("/etc/tracegate/tracegate.env",
          "TRACEGATE_OTLP_OPTS: flags the unit adds")],
        ["tracegated(1)", "tracegate(1)", "tracegate-probes(1)"]),
    "tracegate-relay": (
        "tracegated's consumer protocol over mutual TLS",
        [("/etc/tracegate-relay/relay.pem, relay.key",
          "the relay's certificate and key (the unit starts once relay.pem exists)"),
         ("/etc/tracegate-relay/ca.pem, crl.pem",
          "the CA of client certificates and its revocation list"),
         ("/etc/tracegate-relay/authz",
          "\"identity observe|record\" lines"),
         ("/etc/tracegate/tracegate.env",
          "TRACEGATE_RELAY_LISTEN, TRACEGATE_RELAY_OPTS"),
         ("/var/log/tracegate-relay/audit.log", "the audit log")],
        ["tracegated(1)", "tracegate(1)", "tg-certs(1)"]),
    "tracegate-collector": (
        "fleet flight recorder and trace catalog",
        [("/etc/tracegate-collector/collector.conf", "the config"),
         ("/etc/tracegate-collector/hosts", "the inventory"),
         ("/etc/tracegate-collector/flight.pbtxt", "the rings' TraceConfig"),
         ("/etc/tracegate-collector/collector.pem, collector.key, ca.pem",
          "its client identity toward the relays (the unit starts once "
          "collector.pem exists)"),
         ("/var/lib/tracegate-collector", "the store and its SQLite catalog")],
        ["tracegate(1)", "tracegate-relay(1)", "tg-certs(1)"]),
    "tracegate-perf": (
        "CPU profiler producer for tracegated (linux.perf)",
        [("/etc/tracegate/tracegate.env",
          "TRACEGATE_PERF_OPTS: flags the unit adds")],
        ["tracegated(1)", "tracegate(1)", "tracegate-probes(1)"]),
    "tracegate-emit": (
        "load generator producing into tracegated",
        [], ["tracegated(1)", "tracegate(1)"]),
    "tg-certs": (
        "make the CA, certificates and revocation list of a tracegate fleet",
        [], ["tracegate-relay(1)", "tracegate-collector(1)", "openssl(1)"]),
}

ITEM = re.compile(r"^  (\S.*?)(?: {2,}(\S.*))?$")


def esc(text):
    """Roff-safe text: backslashes and minus signs escaped."""
    return text.replace("\\", "\\e").replace("-", "\\-")


def line(text):
    """One roff text line: a leading '.' or "'" would be a request."""
    out = esc(text)
    return "\\&" + out if out[:1] in (".", "'") else out


def paragraphs(text):
    blocks, cur = [], []
    for l in text.split("\n"):
        if l.strip():
            cur.append(l.rstrip())
        elif cur:
            blocks.append(cur)
            cur = []
    if cur:
        blocks.append(cur)
    return blocks


def is_list(block):
    return (len(block) > 1 and block[0].endswith(":")
            and not block[0].startswith(" ")
            and all(l.startswith("  ") for l in block[1:]))


def render_list(block):
    out = []
    for l in block[1:]:
        m = ITEM.match(l)
        if l.startswith("   ") or not m:   # continuation of a description
            out.append(line(l.strip()))
            continue
        out.append(".TP")
        term = m.group(1).split(" ", 1)
        if len(term) == 1 or term[1].startswith("-"):
            out.append('.B "%s"' % esc(m.group(1)))
        else:  # a flag and its argument's name
            out.append('.BI "%s " "%s"' % (esc(term[0]), esc(term[1])))
        if m.group(2):
            out.append(line(m.group(2)))
    return out


def render_text(block):
    if any(l.startswith(" ") for l in block):
        return [".PP", ".nf"] + [line(l) for l in block] + [".fi"]
    return [".PP"] + [line(l) for l in block]


def page(program, help_text, version):
    summary, files, see_also = PAGES[program]
    blocks = paragraphs(help_text)
    usage = []
    if blocks and blocks[0][0].startswith("usage: "):
        usage = [l.strip() for l in blocks.pop(0)]
        usage[0] = usage[0][len("usage: "):]
    out = ['.TH "%s" 1 "" "tracegate %s" "User Commands"' % (program.upper(), version),
           ".SH NAME", "%s \\- %s" % (esc(program), esc(summary)),
           ".SH SYNOPSIS", ".nf"]
    out += [line(u) for u in usage]
    out += [".fi"]
    lists = [b for b in blocks if is_list(b)]
    text = [b for b in blocks if not is_list(b)]
    if text:
        out.append(".SH DESCRIPTION")
        for b in text:
            out += render_text(b)
    for b in lists:
        out.append(".SH " + esc(b[0][:-1].upper()))
        out += render_list(b)
    if files:
        out.append(".SH FILES")
        for path, what in files:
            out += [".TP", ".I " + line(path), line(what)]
    out += [".SH SEE ALSO", ", ".join(
        "\\fB%s\\fR(%s)" % (esc(p.split("(")[0]), p.split("(")[1][:-1])
        for p in see_also)]
    out.append("The documentation in /usr/share/doc/tracegate/ "
               "(operations.md, security.md, collector.md, commands.md).")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) < 4:
        sys.exit("usage: gen-man.py PROGRAM VERSION OUT [COMMAND...]")
    program, version, out_path = argv[1], argv[2], argv[3]
    if program not in PAGES:
        sys.exit("gen-man: no entry for %s in PAGES" % program)
    cmd = argv[4:] or [program]
    env = dict(os.environ, LC_ALL="C",
               PERFETTO_PRODUCER_SOCK_NAME="/run/perfetto/traced-producer.sock",
               PERFETTO_CONSUMER_SOCK_NAME="/run/perfetto/traced-consumer.sock")
    p = subprocess.run(cmd + ["--help"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60, text=True)
    if p.returncode != 0:
        sys.exit("gen-man: '%s --help' exited %d:\n%s" %
                 (" ".join(cmd), p.returncode, p.stdout))
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        f.write(page(program, p.stdout, version))
    os.replace(tmp, out_path)


if __name__ == "__main__":
    main(sys.argv)
