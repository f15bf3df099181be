/* SPDX-License-Identifier: Apache-2.0 */
/* `tracegate symbolize IN -o OUT`: OUT is IN followed by Perfetto's
 * ModuleSymbols packets for the frames whose module's debug file is found
 * by build id (consumer/symbolize/symbolize.h, docs/perf.md). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/notice.h"
#include "common/printable.h"
#include "cli/cli.h"
#include "consumer/symbolize/symbolize.h"
#include "tracegate/error.h"

static const char about[] =
    "Writes OUT: the trace IN followed by Perfetto's ModuleSymbols packets,\n"
    "which name the frames of its CPU profiles (linux.perf) with function,\n"
    "source file and line. For each module (per machine in a merged trace)\n"
    "the debug file is looked for by build id: DIR/.build-id/xx/yyyy.debug\n"
    "in each --debug-dir and then /usr/lib/debug (Debian's -dbgsym\n"
    "packages), then the module's own file when it has a .symtab or DWARF,\n"
    "then debuginfod, only with --debuginfod (DEBUGINFOD_URLS alone asks\n"
    "nothing), at most 256 lookups, 1 GiB and 2 minutes in all. A file is\n"
    "used only when its build id is the mapping's. A path the trace names\n"
    "is opened only when it is a regular file, has no '..' component and\n"
    "is not under /proc, /sys or /dev. Modules found nowhere keep the\n"
    "names the host gave them. IN is read once, in pieces; OUT is written\n"
    "under a temporary name and renamed. --timeout stops the run (exit 1,\n"
    "[TG-1068], no OUT). --json writes what was found as one JSON object\n"
    "(docs/commands.md).\n"
    "\n"
    "examples:\n"
    "  " CLI_PROG " symbolize perf.pftrace -o perf-sym.pftrace\n"
    "  " CLI_PROG " symbolize t.pftrace -o s.pftrace --debug-dir ./dbg\n"
    "  " CLI_PROG " symbolize t.pftrace -o s.pftrace --timeout 1m\n";

static const char *source_name(tg_sym_source_t s) {
  switch (s) {
    case TG_SYM_SRC_BUILD_ID: return "build_id";
    case TG_SYM_SRC_MODULE: return "module";
    case TG_SYM_SRC_DEBUGINFOD: return "debuginfod";
    default: return "none";
  }
}

/* {"dotdot": N, ...}: every reason, 0 included. */
static json_t *refused_json(const tg_sym_stats_t *st) {
  json_t *o = json_object();
  for (int r = 1; o && r < TG_SYM_REFUSED_N; r++)
    if (json_object_set_new(o, tg_sym_refusal_name((tg_sym_refusal_t)r),
                            json_integer((json_int_t)st->refused[r])) < 0) {
      json_decref(o);
      o = NULL;
    }
  return o;
}

static json_t *debuginfod_json(const tg_sym_stats_t *st) {
  return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "lookups",
                   (json_int_t)st->debuginfod_lookups, "found",
                   (json_int_t)st->debuginfod_found, "cut",
                   (json_int_t)st->debuginfod_cut, "refused",
                   (json_int_t)st->debuginfod_refused, "bytes",
                   (json_int_t)st->debuginfod_bytes, "ms",
                   (json_int_t)(st->debuginfod_ns / 1000000u));
}

static int print_json(const tg_sym_t *s, const tg_sym_result_t *r) {
  json_t *mods = json_array();
  for (size_t i = 0; mods && i < s->n_mods; i++) {
    const tg_sym_module_t *m = &s->mods[i];
    if (!m->n_pcs) continue;
    char hex[2 * TG_SYM_MAX_BUILD_ID + 1];
    for (size_t k = 0; k < m->build_id_len; k++)
      snprintf(hex + 2 * k, 3, "%02x", m->build_id[k]);
    hex[2 * m->build_id_len] = '\0';
    json_t *o = json_pack("{s:I, s:o, s:s, s:I, s:I, s:I, s:s, s:o, s:s?}",
                          "machine_id", (json_int_t)m->machine_id, "path",
                          tg_json_text(m->path), "build_id", hex, "frames",
                          (json_int_t)m->n_pcs, "frames_named",
                          (json_int_t)m->n_addrs, "frames_plt",
                          (json_int_t)m->n_plt, "source",
                          source_name(m->source), "debug_file",
                          m->debug_file ? tg_json_text(m->debug_file)
                                        : json_null(),
                          "refused",
                          m->refused ? tg_sym_refusal_name(m->refused)
                                     : NULL);
    if (!o || json_array_append_new(mods, o) < 0) {
      json_decref(mods);
      mods = NULL;
    }
  }
  json_t *doc = mods ? json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, "
                                 "s:o, s:o}",
                                 "schema", 1, "packets", (json_int_t)r->packets,
                                 "modules", (json_int_t)r->modules,
                                 "modules_found", (json_int_t)r->modules_found,
                                 "frames", (json_int_t)r->frames,
                                 "frames_named", (json_int_t)r->frames_named,
                                 "frames_with_line",
                                 (json_int_t)r->frames_with_line, "frames_plt",
                                 (json_int_t)r->frames_plt, "modules_detail",
                                 mods, "refused", refused_json(&r->stats),
                                 "debuginfod", debuginfod_json(&r->stats))
                     : NULL;
  int rv = doc ? tg_json_dumpf_line(doc, stdout, 0) : -ENOMEM;
  json_decref(doc);
  return rv;
}

int cli_symbolize_main(int argc, char **argv) {
  const char *prog = CLI_PROG " symbolize";
  const char *out = NULL;
  const char *dirs[TG_SYM_MAX_DEBUG_DIRS - 1];
  size_t n_dirs = 0;
  bool debuginfod = false, json = false;
  uint64_t timeout_s = 0;
  tg_flag_list_t dir_list = {dirs, TG_SYM_MAX_DEBUG_DIRS - 1, &n_dirs};
  const tg_flag_t flags[] = {
      {"out", TG_FLAG_STRING, &out, "FILE",
       "-o: the trace to write (IN itself is replaced when whole)", 0, 0},
      {"debug-dir", TG_FLAG_LIST, &dir_list, "DIR",
       "a DIR/.build-id/ tree to try first (repeatable)", 0, 0},
      {"debuginfod", TG_FLAG_BOOL, &debuginfod, NULL,
       "ask the servers of DEBUGINFOD_URLS last", 0, 0},
      {"timeout", TG_FLAG_SECONDS, &timeout_s, "DURATION",
       "stop after this long, OUT unwritten (0: never)", 0, 0},
      {"json", TG_FLAG_BOOL, &json, NULL,
       "write what was found as JSON to stdout", 0, 0},
  };
  char *pos[2];
  size_t n_pos = 0;
  int rv = cli_parse_flags(
      prog,
      "IN -o OUT [--debug-dir DIR]... [--debuginfod]\n"
      "         [--timeout DURATION] [--json]",
      about, flags, sizeof(flags) / sizeof(flags[0]), argc, argv, pos, 2,
      &n_pos);
  if (rv == 1) return CLI_EXIT_OK;
  if (rv < 0) return CLI_EXIT_USAGE;
  if (n_pos != 1 || !out) {
    fprintf(stderr, "%s: needs one input trace and -o OUT (see --help)\n", prog);
    return CLI_EXIT_USAGE;
  }
  const char *urls = getenv("DEBUGINFOD_URLS");
  bool have_urls = urls && urls[0];
  if (debuginfod && !have_urls) {
    fprintf(stderr, "%s: --debuginfod needs the servers in DEBUGINFOD_URLS\n",
            prog);
    return CLI_EXIT_USAGE;
  }
  /* Without --debuginfod nothing may reach a server, libdw's own lookups
   * included (they read DEBUGINFOD_URLS): one thread runs yet. */
  if (!debuginfod) unsetenv("DEBUGINFOD_URLS");
  tg_sym_opts_t o = {.module_files = true, .debuginfod = debuginfod};
  if (timeout_s) {
    o.clock = &tg_clock_monotonic;
    o.deadline_ns = tg_clock_ns(o.clock) + timeout_s * 1000000000ull;
  }
  for (size_t i = 0; i < n_dirs; i++) o.debug_dirs[o.n_debug_dirs++] = dirs[i];
  o.debug_dirs[o.n_debug_dirs++] = "/usr/lib/debug";
  tg_sym_t s;
  tg_sym_init(&s);
  tg_sym_result_t r;
  char why[512] = "";
  rv = tg_sym_file(&s, pos[0], out, &o, &r, why, sizeof(why));
  if (rv == -ETIMEDOUT) {
    char in_shown[512], out_shown[512];
    tg_printable(in_shown, sizeof(in_shown), pos[0]);
    tg_printable(out_shown, sizeof(out_shown), out);
    fprintf(stderr, "%s: %s %s: stopped at --timeout (%" PRIu64 " s); %s "
            "not written\n", prog, tg_notice_tag(TG_N_SYMBOLIZE_TIMED_OUT),
            in_shown, timeout_s, out_shown);
    tg_sym_free(&s);
    return CLI_EXIT_FAIL;
  }
  if (rv) {
    bool damaged = rv == TG_EPARSE || rv == -E2BIG;
    fprintf(stderr, "%s: %s %s\n", prog,
            tg_notice_tag(damaged ? TG_N_TRACE_DAMAGED : TG_N_OUTPUT_UNWRITABLE),
            why[0] ? why : tg_strerror(rv));
    tg_sym_free(&s);
    return CLI_EXIT_FAIL;
  }
  const tg_sym_stats_t *st = &r.stats;
  uint64_t refused = 0;
  for (int k = 1; k < TG_SYM_REFUSED_N; k++) refused += st->refused[k];
  if (refused || st->debuginfod_refused || st->debuginfod_cut)
    fprintf(stderr, "%s: %s files refused: %" PRIu64 " with '..' or "
            "relative, %" PRIu64 " of the kernel (/proc, /sys, /dev), %" PRIu64
            " not regular, %" PRIu64 " split-DWARF .dwo; debuginfod lookups "
            "past a cap: %" PRIu64 " not made, %" PRIu64 " cut short\n", prog,
            tg_notice_tag(TG_N_SYMBOLIZE_REFUSED),
            st->refused[TG_SYM_REFUSED_DOTDOT],
            st->refused[TG_SYM_REFUSED_KERNEL_FS],
            st->refused[TG_SYM_REFUSED_NOT_REGULAR],
            st->refused[TG_SYM_REFUSED_SPLIT_DWARF], st->debuginfod_refused,
            st->debuginfod_cut);
  if (json) {
    rv = print_json(&s, &r);
  } else {
    fprintf(stderr,
            "%s: %zu of %zu frames named (%zu with a line), %zu of %zu "
            "modules found\n",
            prog, r.frames_named, r.frames, r.frames_with_line,
            r.modules_found, r.modules);
    for (size_t i = 0; i < s.n_mods; i++)
      if (s.mods[i].n_pcs && s.mods[i].source == TG_SYM_SRC_NONE) {
        char shown[512];
        tg_printable(shown, sizeof(shown), s.mods[i].path);
        fprintf(stderr, "%s: no debug file for %s (machine %u)\n", prog,
                shown, s.mods[i].machine_id);
      }
  }
  tg_sym_free(&s);
  return rv ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
