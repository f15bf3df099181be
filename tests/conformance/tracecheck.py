"""What trace_processor makes of a trace: the rows of the tables the job
compares, and the import's error and data-loss stats (what
../shared/perfetto/tp-stats reports, in the same query)."""

import csv
import io
import os
import subprocess

# (label, table, filter, timed): the tables Perfetto's probes fill, and
# whether their rows have a time (ts) that a window can bound. Slices are
# the traced system's: perfetto.metatrace's time each tracer's own code,
# which the two stacks share no reason to have as many of.
TABLES = (("sched", "sched", None, True),
          ("thread_state", "thread_state", None, True),
          ("counters", "counter", None, True),
          ("process", "process", None, False),
          ("thread", "thread", None, False),
          ("ftrace_event", "ftrace_event", None, True),
          ("slices", "slice",
           "(category is null or category != 'metatrace')", True))

# A table of ours holds at least this share of the rows Perfetto's holds
# for the same config, duration and workload.
MIN_SHARE = 0.9


def _count(table, where, timed, window):
    conds = [where] if where else []
    if timed and window:
        conds.append("ts between %d and %d" % window)
    return "(select count(*) from %s%s)" % (
        table, " where " + " and ".join(conds) if conds else "")


def _query(window=None):
    """The query of inspect(): each table's rows ('table'), and when
    |window| ((first ns, last ns), both included) is given, those of them
    with a time within it ('window'; untimed tables whole)."""
    parts = ["select 'table' as kind, '%s' as name, %s as value" %
             (label, _count(t, w, timed, None))
             for label, t, w, timed in TABLES]
    if window:
        parts += ["select 'window', '%s', %s" %
                  (label, _count(t, w, timed, window))
                  for label, t, w, timed in TABLES]
    parts.append("select 'stat', name || coalesce('[' || idx || ']', ''), "
                 "value from stats where value > 0 and "
                 "severity in ('error', 'data_loss')")
    return "\nunion all ".join(parts) + ";\n"


def common_window(a, b):
    """The time both traces cover, from their (start, end) bounds: None
    when either is unknown or they do not overlap."""
    if not a or not b:
        return None
    w = (max(a[0], b[0]), min(a[1], b[1]))
    return w if w[0] <= w[1] else None


class ImportError_(Exception):
    pass


def _run(tools, trace, workdir, name, sql_text, first_column):
    """trace_processor's rows for sql_text on trace, as dicts."""
    if not os.path.isfile(trace) or os.path.getsize(trace) == 0:
        raise ImportError_("no trace written")
    sql = os.path.join(workdir, name)
    with open(sql, "w") as f:
        f.write(sql_text)
    r = subprocess.run([tools.perfetto_bin("trace_processor_shell"), "-q", sql,
                        trace], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise ImportError_("trace_processor exit %d: %s" %
                           (r.returncode, r.stderr.strip()[-300:]))
    lines = r.stdout.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines)
                     if ln.startswith('"%s"' % first_column))
    except StopIteration:
        raise ImportError_("trace_processor printed no result")
    return list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))


def bounds(tools, trace, workdir):
    """(start, end) of trace in ns (trace_processor's trace_bounds); None
    for an empty trace; ImportError_ if it cannot be imported."""
    rows = _run(tools, trace, workdir, "bounds.sql",
                "select start_ts, end_ts from trace_bounds;\n", "start_ts")
    try:
        b = (int(rows[0]["start_ts"]), int(rows[0]["end_ts"]))
    except (IndexError, KeyError, TypeError, ValueError):
        return None
    return b if b[0] <= b[1] else None


def inspect(tools, trace, workdir, window=None):
    """({label: rows}, {stat: value}, {label: rows within window} or None
    without a window) of trace; ImportError_ if trace_processor cannot
    import it."""
    tables, stats, windowed = {}, {}, {} if window else None
    kinds = {"table": tables, "stat": stats, "window": windowed}
    for row in _run(tools, trace, workdir, "inspect.sql", _query(window),
                    "kind"):
        kinds[row["kind"]][row["name"]] = int(row["value"])
    return tables, stats, windowed


def stats_text(stats):
    return ", ".join("%s=%d" % kv for kv in sorted(stats.items()))


def shortfalls(ours, theirs, ours_w=None, theirs_w=None):
    """The tables where ours holds less than MIN_SHARE of theirs, over
    the whole traces and, when the counts within the time both cover are
    given (ours_w, theirs_w), within it too. Each count alone has its own
    noise, one-sided: the whole traces' the first stack's start (enabling
    ftrace makes a burst of events only it was there to see), the
    window's its edges (a polled source's reading falls just in or out of
    it, a few hundred counters at once); a table short of data is short
    in both."""
    def short(o, t):
        return {k: (o.get(k, 0), n) for k, n in t.items()
                if n > 0 and o.get(k, 0) < MIN_SHARE * n}
    whole = short(ours, theirs)
    if ours_w is not None and theirs_w is not None:
        within = short(ours_w, theirs_w)
        return ["%s %d < %d%% of %d (%d of %d within the time both cover)" %
                (k, o, MIN_SHARE * 100, n, within[k][0], within[k][1])
                for k, (o, n) in whole.items() if k in within]
    return ["%s %d < %d%% of %d" % (k, o, MIN_SHARE * 100, n)
            for k, (o, n) in whole.items()]


def split_stats(ours, theirs):
    """(own, shared): ours's stats that Perfetto's trace of the same
    config, recorded at the same time, does not report as high, and those
    it does. A shared one comes with the config, not with our service:
    config_write_into_file_no_flush (write_into_file without a flush
    period), the patches a full DISCARD buffer refuses."""
    own = {k: v for k, v in ours.items() if theirs.get(k, 0) < v}
    return own, {k: v for k, v in ours.items() if k not in own}
