/* SPDX-License-Identifier: Apache-2.0 */
/* `tracegate profile FILE [--pprof] [--host H|all] [-o OUT] [--json]`: the
 * CPU profiles of a trace's hosts (consumer/profile/profile.h), as pprof
 * or as a summary; also what `tracegate snapshot ID --pprof` writes with
 * (cli_profile_output). `--diff H`: host H against the median of the
 * others (consumer/profile/profile_diff.h). docs/profiles.md. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/fd_write.h"
#include "common/json.h"
#include "common/notice.h"
#include "common/printable.h"
#include "consumer/profile/profile.h"
#include "consumer/profile/profile_diff.h"
#include "tracegate/error.h"

#define TOP_FUNCTIONS 10
#define TOP_DIFF 25

static const char about[] =
    "Reads the CPU profiles (linux.perf samples of tracegate-perf) of each\n"
    "host of FILE: one host's trace, a `record -H` merge or a collector\n"
    "snapshot. Samples are aggregated by callstack per host (machine);\n"
    "samples without a callstack or with frames without a name are counted\n"
    "and kept as such, never folded into another stack.\n"
    "\n"
    "--pprof writes pprof's profile.proto, gzipped (go tool pprof,\n"
    "Pyroscope, Parca, speedscope): sample types samples/count and\n"
    "cpu/nanoseconds. Without --pprof: a summary per host (--json: one\n"
    "JSON object). A host is its name in a merged trace or its machine id;\n"
    "a trace whose samples come from several hosts needs --host H, or\n"
    "--host all (pprof: the hosts merged, each sample labelled host=NAME).\n"
    "Progress goes to stderr for a large FILE.\n"
    "\n"
    "--diff H compares host H with the median of the other hosts with\n"
    "samples: per function, H's share of its CPU time (self: as the leaf;\n"
    "total: anywhere in the stack), the peers' median share, the\n"
    "difference and the samples behind each, largest difference first; a\n"
    "'*' marks a difference beyond 3 standard errors at H's sample count.\n"
    "A host under 100 samples is marked too few (nothing significant), and\n"
    "such peers are left out of the median. --json: the rows and the call\n"
    "tree as JSON. --pprof -o OUT writes H's call tree and --base-pprof\n"
    "BASE the peers' median one, both in H's nanoseconds: go tool pprof\n"
    "-diff_base=BASE OUT shows the difference.\n"
    "\n"
    "examples:\n"
    "  " CLI_PROG " profile fleet.pftrace\n"
    "  " CLI_PROG " profile fleet.pftrace --pprof --host web1 -o web1.pb.gz\n"
    "  " CLI_PROG " profile perf.pftrace --pprof -o perf.pb.gz && "
    "go tool pprof -top perf.pb.gz\n"
    "  " CLI_PROG " profile fleet.pftrace --diff web7\n"
    "  " CLI_PROG " profile fleet.pftrace --diff web7 --pprof -o web7.pb.gz "
    "--base-pprof peers.pb.gz\n";

static void on_progress(void *ctx, uint64_t bytes) {
  fprintf(stderr, "%s: %" PRIu64 " MiB read\n", (const char *)ctx,
          bytes >> 20);
}

static bool has_samples(const tg_prof_host_t *h) { return h->counts.samples; }

static void host_label(const tg_prof_host_t *h, char *out, size_t n) {
  if (h->name[0]) tg_printable(out, n, h->name);
  else snprintf(out, n, "machine %" PRIu32, h->machine_id);
}

static void list_hosts(FILE *f, const tg_prof_t *p) {
  size_t n = tg_prof_n_hosts(p);
  for (size_t i = 0; i < n; i++) {
    const tg_prof_host_t *h = tg_prof_host(p, i);
    if (!has_samples(h)) continue;
    char name[400];
    host_label(h, name, sizeof(name));
    fprintf(f, "  %s (machine %" PRIu32 "): %" PRIu64 " samples\n", name,
            h->machine_id, h->counts.samples);
  }
}

/* The hosts |spec| names (NULL: the only one with samples), into |idx|.
 * Returns the count, or -1 after saying why. */
static long pick_hosts(const char *prog, const tg_prof_t *p, const char *spec,
                       size_t *idx, size_t cap) {
  size_t n = tg_prof_n_hosts(p), k = 0, with = 0;
  for (size_t i = 0; i < n; i++) with += has_samples(tg_prof_host(p, i));
  if (!spec && with > 1) {
    fprintf(stderr, "%s: %s %zu hosts have CPU profile samples: name one with "
            "--host, or --host all:\n", prog,
            tg_notice_tag(TG_N_PROFILE_HOST_NEEDED), with);
    list_hosts(stderr, p);
    return -1;
  }
  if (!spec || !strcmp(spec, "all")) {
    for (size_t i = 0; i < n && k < cap; i++)
      if (has_samples(tg_prof_host(p, i))) idx[k++] = i;
    return (long)k;
  }
  const tg_prof_host_t *h = tg_prof_find_host(p, spec);
  if (!h || !has_samples(h)) {
    char shown[400];
    tg_printable(shown, sizeof(shown), spec);
    fprintf(stderr, "%s: %s no host %s with samples; the hosts with some:\n",
            prog, tg_notice_tag(TG_N_PROFILE_NO_SUCH_HOST), shown);
    list_hosts(stderr, p);
    return -1;
  }
  for (size_t i = 0; i < n; i++)
    if (tg_prof_host(p, i) == h) idx[k++] = i;
  return (long)k;
}

static void warn_counts(const char *prog, const tg_prof_host_t *h) {
  const tg_prof_counts_t *c = &h->counts;
  uint64_t odd = c->no_callstack + c->callstack_unknown + c->over_bounds +
                 c->unnamed_frames;
  if (!odd) return;
  char name[400];
  host_label(h, name, sizeof(name));
  fprintf(stderr, "%s: %s %s: of %" PRIu64 " samples, %" PRIu64
          " without a callstack, %" PRIu64 " with one not interned, %" PRIu64
          " past a bound, %" PRIu64 " with an unnamed frame\n", prog,
          tg_notice_tag(TG_N_PROFILE_UNNAMED), name, c->samples,
          c->no_callstack, c->callstack_unknown, c->over_bounds,
          c->unnamed_frames);
}

static json_t *host_json(const tg_prof_host_t *h) {
  const tg_prof_counts_t *c = &h->counts;
  tg_prof_func_share_t *fs = NULL;
  size_t n_fs = 0;
  if (tg_prof_function_shares(h, &fs, &n_fs) < 0) return NULL;
  json_t *top = json_array();
  for (size_t i = 0; top && i < n_fs && i < TOP_FUNCTIONS; i++) {
    json_t *o = json_pack("{s:o, s:o, s:I, s:I, s:I, s:I}", "name",
                          tg_json_text(fs[i].name), "file",
                          fs[i].file ? tg_json_text(fs[i].file) : json_null(),
                          "self", (json_int_t)fs[i].self, "total",
                          (json_int_t)fs[i].total, "self_ns",
                          (json_int_t)fs[i].self_ns, "total_ns",
                          (json_int_t)fs[i].total_ns);
    if (!o || json_array_append_new(top, o) < 0) {
      json_decref(top);
      top = NULL;
    }
  }
  free(fs);
  json_t *skipped = json_pack("{s:I, s:I, s:I, s:I, s:I}", "other",
                              (json_int_t)c->skipped[0], "read",
                              (json_int_t)c->skipped[1], "unwind",
                              (json_int_t)c->skipped[2], "unwind_enqueue",
                              (json_int_t)c->skipped[3], "not_in_scope",
                              (json_int_t)c->skipped[4]);
  json_t *counts = json_pack(
      "{s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:I, s:I, s:I}", "samples",
      (json_int_t)c->samples, "no_callstack", (json_int_t)c->no_callstack,
      "callstack_not_interned", (json_int_t)c->callstack_unknown,
      "over_bounds", (json_int_t)c->over_bounds, "with_unnamed_frame",
      (json_int_t)c->unnamed_frames, "truncated", (json_int_t)c->truncated,
      "skipped", skipped, "records_lost", (json_int_t)c->records_lost,
      "bad_refs", (json_int_t)c->bad_refs, "refused_entries",
      (json_int_t)c->refused_entries);
  return json_pack("{s:I, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, "
                   "s:o}",
                   "machine_id", (json_int_t)h->machine_id, "name",
                   tg_json_text(h->name), "cpu_ns", (json_int_t)h->cpu_ns,
                   "ts_min", (json_int_t)h->ts_min, "ts_max",
                   (json_int_t)h->ts_max, "ns_per_sample_min",
                   (json_int_t)h->ns_per_sample_min, "ns_per_sample_max",
                   (json_int_t)h->ns_per_sample_max, "frequency_hz_min",
                   (json_int_t)h->frequency_hz_min, "frequency_hz_max",
                   (json_int_t)h->frequency_hz_max, "stacks",
                   (json_int_t)h->n_stacks, "counts", counts,
                   "top_functions", top);
}

static int summary(const tg_prof_t *p, const size_t *idx, size_t n, bool json) {
  if (json) {
    json_t *hosts = json_array();
    for (size_t i = 0; hosts && i < n; i++) {
      json_t *o = host_json(tg_prof_host(p, idx[i]));
      if (!o || json_array_append_new(hosts, o) < 0) {
        json_decref(hosts);
        hosts = NULL;
      }
    }
    json_t *doc = hosts ? json_pack("{s:i, s:I, s:I, s:o}", "schema", 1,
                                    "packets", (json_int_t)tg_prof_packets(p),
                                    "bad_packets",
                                    (json_int_t)tg_prof_bad_packets(p), "hosts",
                                    hosts)
                        : NULL;
    int rv = doc ? tg_json_dumpf_line(doc, stdout, 0) : -ENOMEM;
    json_decref(doc);
    return rv;
  }
  for (size_t i = 0; i < n; i++) {
    const tg_prof_host_t *h = tg_prof_host(p, idx[i]);
    char name[400];
    host_label(h, name, sizeof(name));
    printf("%s (machine %" PRIu32 "): %" PRIu64 " samples, %.3f s of CPU, "
           "%zu stacks\n", name, h->machine_id, h->counts.samples,
           (double)h->cpu_ns / 1e9, h->n_stacks);
    tg_prof_func_share_t *fs = NULL;
    size_t n_fs = 0;
    if (tg_prof_function_shares(h, &fs, &n_fs) < 0) return -ENOMEM;
    for (size_t k = 0; k < n_fs && k < TOP_FUNCTIONS; k++) {
      char fn[400], file[400] = "";
      tg_printable(fn, sizeof(fn), fs[k].name);
      if (fs[k].file) tg_printable(file, sizeof(file), fs[k].file);
      double total = h->counts.samples ? (double)h->counts.samples : 1;
      printf("  %6.2f%% self %6.2f%% total  %s%s%s\n",
             100.0 * (double)fs[k].self / total,
             100.0 * (double)fs[k].total / total, fn, file[0] ? " " : "",
             file);
    }
    free(fs);
  }
  return 0;
}

static int write_out(const char *out, const tg_buf_t *b) {
  if (!out || !strcmp(out, "-"))
    return tg_write_all(STDOUT_FILENO, tg_buf_begin(b), tg_buf_size(b));
  int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return -errno;
  int rv = tg_write_all(fd, tg_buf_begin(b), tg_buf_size(b));
  if (close(fd) < 0 && !rv) rv = -errno;
  return rv;
}

int cli_profile_output(const char *prog, const tg_prof_t *p, const char *host,
                       const char *out, bool pprof, bool json) {
  size_t n = tg_prof_n_hosts(p);
  size_t *idx = calloc(n ? n : 1, sizeof(*idx));
  if (!idx) return CLI_EXIT_FAIL;
  long k = pick_hosts(prog, p, host, idx, n);
  if (k < 0) {
    free(idx);
    return CLI_EXIT_USAGE;
  }
  for (long i = 0; i < k; i++) warn_counts(prog, tg_prof_host(p, idx[i]));
  int rv;
  if (!pprof) {
    rv = summary(p, idx, (size_t)k, json);
  } else {
    if ((!out || !strcmp(out, "-")) && isatty(STDOUT_FILENO)) {
      fprintf(stderr, "%s: --pprof writes binary: give -o FILE (or redirect "
              "stdout)\n", prog);
      free(idx);
      return CLI_EXIT_USAGE;
    }
    tg_buf_t b;
    tg_buf_init(&b, 0);
    tg_prof_pprof_opts_t o = {.hosts = idx, .n_hosts = (size_t)k};
    rv = tg_prof_pprof(p, &o, &b);
    if (!rv && (rv = write_out(out, &b)) < 0) {
      char shown[512];
      tg_printable(shown, sizeof(shown), out ? out : "-");
      fprintf(stderr, "%s: %s cannot write %s: %s\n", prog,
              tg_notice_tag(TG_N_OUTPUT_UNWRITABLE), shown, strerror(-rv));
      tg_buf_free(&b);
      free(idx);
      return CLI_EXIT_FAIL;
    }
    tg_buf_free(&b);
  }
  free(idx);
  if (rv) fprintf(stderr, "%s: %s\n", prog, tg_strerror(rv));
  return rv ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

static void diff_text(const tg_prof_diff_t *d) {
  char name[400];
  tg_printable(name, sizeof(name), d->host_name[0] ? d->host_name : "-");
  printf("%s (machine %" PRIu32 "): %" PRIu64 " samples, %.3f s of CPU, "
         "against the median of %zu peers (%" PRIu64 " samples)%s\n",
         name, d->host_machine_id, d->host_counts.samples,
         (double)d->host_cpu_ns / 1e9, d->n_peers, d->peers_samples,
         d->by_samples ? "; shares of samples (no CPU time)" : "");
  if (d->too_few_samples)
    printf("  too few samples (fewer than %" PRIu64 "): no difference is "
           "significant\n", d->min_samples);
  if (d->n_peers_too_few)
    printf("  %zu peers left out: fewer than %" PRIu64 " samples\n",
           d->n_peers_too_few, d->min_samples);
  printf("  %8s %7s %7s %8s %9s %8s  %s\n", "self", "host", "peers",
         "host n", "peers n", "total", "function (* significant)");
  for (size_t i = 0; i < d->n_funcs && i < TOP_DIFF; i++) {
    const tg_prof_diff_func_t *f = &d->funcs[i];
    char fn[400], file[400] = "";
    tg_printable(fn, sizeof(fn), f->name);
    if (f->file) tg_printable(file, sizeof(file), f->file);
    printf("  %+7.2f%% %6.2f%% %6.2f%% %8" PRIu64 " %9" PRIu64 " %+7.2f%%  "
           "%s%s%s%s\n",
           100 * f->diff_self, 100 * f->host_self, 100 * f->peers_self,
           f->host_self_samples, f->peers_self_samples, 100 * f->diff_total,
           fn, file[0] ? " " : "", file,
           f->significant_self || f->significant_total ? " *" : "");
  }
}

static int diff_pprof(const char *prog, const tg_prof_diff_t *d, bool base,
                      const char *out) {
  tg_buf_t b;
  tg_buf_init(&b, 0);
  int rv = tg_prof_diff_pprof(d, base, &b);
  if (!rv && (rv = write_out(out, &b)) < 0) {
    char shown[512];
    tg_printable(shown, sizeof(shown), out ? out : "-");
    fprintf(stderr, "%s: %s cannot write %s: %s\n", prog,
            tg_notice_tag(TG_N_OUTPUT_UNWRITABLE), shown, strerror(-rv));
  } else if (rv) {
    fprintf(stderr, "%s: %s\n", prog, tg_strerror(rv));
  }
  tg_buf_free(&b);
  return rv;
}

/* --diff: |spec| against every other host with samples. */
static int diff_output(const char *prog, const tg_prof_t *p, const char *spec,
                       const char *out, const char *base_out, bool pprof,
                       bool json) {
  size_t n = tg_prof_n_hosts(p), idx;
  if (pick_hosts(prog, p, spec, &idx, 1) != 1) return CLI_EXIT_USAGE;
  const tg_prof_host_t *h = tg_prof_host(p, idx);
  const tg_prof_host_t **peers = calloc(n ? n : 1, sizeof(*peers));
  if (!peers) return CLI_EXIT_FAIL;
  size_t np = 0;
  for (size_t i = 0; i < n; i++)
    if (i != idx && has_samples(tg_prof_host(p, i)))
      peers[np++] = tg_prof_host(p, i);
  warn_counts(prog, h);
  tg_prof_diff_t *d = NULL;
  int rv = tg_prof_diff(h, peers, np, NULL, &d);
  free(peers);
  if (rv) {
    fprintf(stderr, "%s: %s\n", prog,
            rv == -ENOSPC ? "too many call paths in the hosts together"
                          : tg_strerror(rv));
    return CLI_EXIT_FAIL;
  }
  if (pprof) {
    rv = diff_pprof(prog, d, false, out);
    if (!rv && base_out) rv = diff_pprof(prog, d, true, base_out);
  } else if (json) {
    json_t *doc = tg_prof_diff_json(d, TG_PROF_DIFF_MIN_SHARE);
    rv = doc ? tg_json_dumpf_line(doc, stdout, 0) : -ENOMEM;
    json_decref(doc);
  } else {
    diff_text(d);
  }
  tg_prof_diff_free(d);
  return rv ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

int cli_profile_main(int argc, char **argv) {
  const char *prog = CLI_PROG " profile";
  const char *out = NULL, *host = NULL, *diff = NULL, *base_out = NULL;
  bool pprof = false, json = false;
  const tg_flag_t flags[] = {
      {"pprof", TG_FLAG_BOOL, &pprof, NULL,
       "write pprof's profile.proto, gzipped", 0, 0},
      {"host", TG_FLAG_STRING, &host, "H|all",
       "the host: its name or machine id; all: every host", 0, 0},
      {"out", TG_FLAG_STRING, &out, "FILE",
       "-o: where --pprof writes (default: stdout, not a terminal)", 0, 0},
      {"json", TG_FLAG_BOOL, &json, NULL,
       "the summary as one JSON object on stdout", 0, 0},
      {"diff", TG_FLAG_STRING, &diff, "H",
       "host H against the median of the other hosts", 0, 0},
      {"base-pprof", TG_FLAG_STRING, &base_out, "FILE",
       "with --diff --pprof: the peers' median profile, for -diff_base", 0,
       0},
  };
  char *pos[2];
  size_t n_pos = 0;
  int rv = cli_parse_flags(prog, "FILE [--pprof] [--host H|all] [-o OUT] [--json]\n"
                           "       FILE --diff H [--json | --pprof -o OUT "
                           "[--base-pprof BASE]]",
                           about, flags, sizeof(flags) / sizeof(flags[0]), argc,
                           argv, pos, 2, &n_pos);
  if (rv == 1) return CLI_EXIT_OK;
  if (rv < 0) return CLI_EXIT_USAGE;
  if (n_pos != 1) {
    fprintf(stderr, "%s: needs one trace file (see --help)\n", prog);
    return CLI_EXIT_USAGE;
  }
  if (pprof && json) {
    fprintf(stderr, "%s: --pprof and --json are two outputs: give one\n", prog);
    return CLI_EXIT_USAGE;
  }
  if (diff && !strcmp(diff, "all")) {
    fprintf(stderr, "%s: --diff H: one host, against all the others\n", prog);
    return CLI_EXIT_USAGE;
  }
  if (diff && host) {
    fprintf(stderr, "%s: --diff H names the host: --host is not for it\n",
            prog);
    return CLI_EXIT_USAGE;
  }
  if (base_out && (!diff || !pprof)) {
    fprintf(stderr, "%s: --base-pprof goes with --diff H --pprof\n", prog);
    return CLI_EXIT_USAGE;
  }
  if (diff && pprof && (!out || !strcmp(out, "-")) && isatty(STDOUT_FILENO)) {
    fprintf(stderr, "%s: --pprof writes binary: give -o FILE (or redirect "
            "stdout)\n", prog);
    return CLI_EXIT_USAGE;
  }
  int fd = !strcmp(pos[0], "-") ? dup(STDIN_FILENO)
                                 : open(pos[0], O_RDONLY | O_CLOEXEC);
  char shown[512];
  tg_printable(shown, sizeof(shown), pos[0]);
  if (fd < 0) {
    fprintf(stderr, "%s: cannot open %s: %s\n", prog, shown, strerror(errno));
    return CLI_EXIT_FAIL;
  }
  tg_prof_t *p = tg_prof_new(NULL);
  if (!p) {
    close(fd);
    fprintf(stderr, "%s: out of memory\n", prog);
    return CLI_EXIT_FAIL;
  }
  rv = tg_prof_read_fd(p, fd, on_progress, (void *)prog);
  close(fd);
  if (rv) {
    fprintf(stderr, "%s: %s %s: %s\n", prog,
            tg_notice_tag(TG_N_TRACE_DAMAGED), shown,
            rv == -ENOMEM ? "out of memory" : tg_strerror(rv));
    tg_prof_free(p);
    return CLI_EXIT_FAIL;
  }
  if (diff)
    rv = diff_output(prog, p, diff, out, base_out, pprof, json);
  else
    rv = cli_profile_output(prog, p, host, out, pprof, json);
  tg_prof_free(p);
  return rv;
}
