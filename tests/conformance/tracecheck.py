"""What trace_processor makes of a trace: the rows of the tables the job
compares, and the import's error and data-loss stats (what
../shared/perfetto/tp-stats reports, in the same query)."""

import csv
import io
import os
import subprocess

# (label, the rows counted): the tables Perfetto's probes fill. Slices
# are the traced system's: perfetto.metatrace's time each tracer's own
# code, which the two stacks share no reason to have as many of.
TABLES = (("sched", "sched"), ("thread_state", "thread_state"),
          ("counters", "counter"), ("process", "process"),
          ("thread", "thread"), ("ftrace_event", "ftrace_event"),
          ("slices", "slice where category is null "
                     "or category != 'metatrace'"))

# A table of ours holds at least this share of the rows Perfetto's holds
# for the same config, duration and workload.
MIN_SHARE = 0.9


def _query():
    parts = ["select 'table' as kind, '%s' as name, "
             "(select count(*) from %s) as value" % t for t in TABLES]
    parts.append("select 'stat', name || coalesce('[' || idx || ']', ''), "
                 "value from stats where value > 0 and "
                 "severity in ('error', 'data_loss')")
    return "\nunion all ".join(parts) + ";\n"


class ImportError_(Exception):
    pass


def inspect(tools, trace, workdir):
    """({label: rows}, {stat: value}) of trace; ImportError_ if
    trace_processor cannot import it."""
    if not os.path.isfile(trace) or os.path.getsize(trace) == 0:
        raise ImportError_("no trace written")
    sql = os.path.join(workdir, "inspect.sql")
    with open(sql, "w") as f:
        f.write(_query())
    r = subprocess.run([tools.perfetto_bin("trace_processor_shell"), "-q", sql,
                        trace], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise ImportError_("trace_processor exit %d: %s" %
                           (r.returncode, r.stderr.strip()[-300:]))
    lines = r.stdout.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines)
                     if ln.startswith('"kind"'))
    except StopIteration:
        raise ImportError_("trace_processor printed no result")
    tables, stats = {}, {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        v = int(row["value"])
        (tables if row["kind"] == "table" else stats)[row["name"]] = v
    return tables, stats


def stats_text(stats):
    return ", ".join("%s=%d" % kv for kv in sorted(stats.items()))


def shortfalls(ours, theirs):
    """The tables where ours holds less than MIN_SHARE of theirs."""
    return ["%s %d < %d%% of %d" % (t, ours.get(t, 0), MIN_SHARE * 100, n)
            for t, n in theirs.items()
            if n > 0 and ours.get(t, 0) < MIN_SHARE * n]


def split_stats(ours, theirs):
    """(own, shared): ours's stats that Perfetto's trace of the same
    config, recorded at the same time, does not report as high, and those
    it does. A shared one comes with the config, not with our service:
    config_write_into_file_no_flush (write_into_file without a flush
    period), the patches a full DISCARD buffer refuses."""
    own = {k: v for k, v in ours.items() if theirs.get(k, 0) < v}
    return own, {k: v for k, v in ours.items() if k not in own}
