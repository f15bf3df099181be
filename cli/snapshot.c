/* `tracegate snapshot --collector ADDR`: asks tracegate-collector for a
 * fleet snapshot (POST /api/v1/snapshots?wait=1, collector/daemon/api.c)
 * and waits until it is stored, then says what it came to.
 * `tracegate snapshot get ID --collector ADDR [--host H[,H2]] --output
 * FILE` downloads a stored snapshot's trace, or those hosts' part (GET
 * /api/v1/snapshots/ID/trace?host=), into FILE: written under a
 * temporary name and renamed when whole, so FILE is never half a trace.
 *
 * The request itself (the collector's address, libwebsockets' HTTP(S)
 * client on a loop of its own, the bounded reply) is snapshot_req.c's;
 * the reply's JSON is read by snapshot_json.c and every string from it
 * reaches the terminal through tg_printable().
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fd_write.h"
#include "common/log.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "cli/snapshot_json.h"
#include "cli/snapshot_req.h"
#include "ipc/net_addr.h"

#define PROG CLI_PROG " snapshot"
#define DEFAULT_TIMEOUT_S 300
#define API_PATH CLI_SNAP_API_PATH
#define REASON_MAX CLI_SNAP_REASON_MAX
#define GROUP_MAX CLI_SNAP_GROUP_MAX
/* Failed hosts named one per line; the rest are in --json. */
#define FAILED_LINES_MAX 20

/* --- the answer --------------------------------------------------------------- */

static int put_body(FILE *f, const void *arg) {
  const req_t *r = arg;
  size_t n = tg_buf_size(&r->body);
  return fwrite(tg_buf_begin(&r->body), 1, n, f) == n ? 0 : -EIO;
}

/* What a problem is about: its data source, else its kind ("merge":
 * packets the merge left out, consumer/fleet/merge_problem.h). */
static const char *problem_head(const cli_snap_problem_t *p) {
  return p->data_source[0] ? p->data_source : p->kind;
}

/* A host's problems (consumer/fleet/ds_problem.h, consumer/fleet/merge_problem.h), one
 * line each. */
static void print_problems(const cli_snap_host_t *h) {
  for (size_t k = 0; k < h->n_problems && k < CLI_SNAP_MAX_PROBLEMS; k++) {
    char code[32], head[160], why[700];
    tg_printable(code, sizeof(code), h->problems[k].code);
    tg_printable(head, sizeof(head), problem_head(&h->problems[k]));
    tg_printable(why, sizeof(why), h->problems[k].why);
    fprintf(stderr, "    [%s] %s: %s\n", code, head, why);
  }
  if (h->n_problems > CLI_SNAP_MAX_PROBLEMS)
    fprintf(stderr, "    ... and %zu more problems\n",
            h->n_problems - CLI_SNAP_MAX_PROBLEMS);
}

/* What the summary says of a 200 reply, and the exit status. */
static int summarize(const cli_snap_reply_t *s) {
  char state[32], size[32];
  tg_printable(state, sizeof(state), s->state);
  cli_format_bytes(size, sizeof(size), s->bytes);
  uint64_t ok = s->hosts >= s->hosts_failed ? s->hosts - s->hosts_failed : 0;
  fprintf(stderr, CLI_PROG ": snapshot %s: %s, %" PRIu64 " of %" PRIu64
          " hosts, %s\n", s->id, state, ok, s->hosts, size);
  for (size_t i = 0; i < s->n_failed && i < CLI_SNAP_MAX_FAILED &&
                     i < FAILED_LINES_MAX; i++) {
    char host[300], err[600];
    tg_printable(host, sizeof(host), s->failed[i].host);
    tg_printable(err, sizeof(err), s->failed[i].error[0] ? s->failed[i].error
                                                         : "failed");
    const cli_snap_host_t *h = &s->failed[i];
    /* A host PARTIAL for its problems alone (a data source that did not
     * run, packets the merge left out): its error is one problem's line,
     * said below with the others. */
    const cli_snap_problem_t *said = NULL;
    for (size_t k = 0; k < h->n_problems && k < CLI_SNAP_MAX_PROBLEMS; k++) {
      const cli_snap_problem_t *p = &h->problems[k];
      char line[sizeof(h->problems[0]) + 8];
      if (p->data_source[0])
        snprintf(line, sizeof(line), "[%s] %s: %s", p->code, p->data_source,
                 p->why);
      else
        snprintf(line, sizeof(line), "[%s] %s", p->code, p->why);
      if (!said && !strcmp(line, h->error)) said = p;
    }
    if (!said)
      fprintf(stderr, "  %s: %s%s\n", host, err,
              h->partial ? " (what it sent before is in the snapshot)" : "");
    else if (said->data_source[0])
      fprintf(stderr, "  %s: its data is in the snapshot, but not all that "
              "was asked for:\n", host);
    else
      fprintf(stderr, "  %s: its data is in the snapshot, less what the "
              "merge left out:\n", host);
    print_problems(h);
  }
  for (size_t i = 0; i < s->n_noted && i < CLI_SNAP_MAX_NOTED; i++) {
    char host[300];
    tg_printable(host, sizeof(host), s->noted[i].host);
    fprintf(stderr, "  %s: ok, with:\n", host);
    print_problems(&s->noted[i]);
  }
  if (s->n_noted > CLI_SNAP_MAX_NOTED)
    fprintf(stderr, "  ... and %zu more hosts with problems\n",
            s->n_noted - CLI_SNAP_MAX_NOTED);
  if (s->n_failed > FAILED_LINES_MAX)
    fprintf(stderr, "  ... and %zu more failed hosts\n",
            s->n_failed - FAILED_LINES_MAX);
  if (!strcmp(s->state, "complete")) return CLI_EXIT_OK;
  if (!strcmp(s->state, "partial")) return CLI_EXIT_PARTIAL;
  return CLI_EXIT_FAIL;
}

static int answer(const snap_opts_t *o, const req_t *r) {
  cli_snap_reply_t *s = malloc(sizeof(*s));
  if (!s) {
    fprintf(stderr, "%s: out of memory\n", PROG);
    return CLI_EXIT_FAIL;
  }
  char err[128];
  size_t n = tg_buf_size(&r->body);
  const char *text = n ? (const char *)tg_buf_begin(&r->body) : "";
  bool json_ok = cli_snap_parse(text, n, s, err, sizeof(err)) == 0;
  int code = CLI_EXIT_FAIL;
  if (r->status != 200) {
    char why[600];
    tg_printable(why, sizeof(why), json_ok && s->error[0] ? s->error
                                   : "no reason given");
    fprintf(stderr, "%s: the collector refused (HTTP %d): %s\n", PROG,
            r->status, why);
  } else if (!json_ok || !s->has_snapshot || !s->state[0]) {
    fprintf(stderr, "%s: the collector's reply is not a snapshot: %s\n", PROG,
            json_ok ? "no snapshot.id or snapshot.state" : err);
  } else {
    code = summarize(s);
    if (o->json) {
      int rv = cli_json_file_write(o->json, put_body, r);
      if (rv < 0) {
        fprintf(stderr, "%s: --json %s: %s\n", PROG, o->json, strerror(-rv));
        code = CLI_EXIT_FAIL;
      }
    }
  }
  free(s);
  return code;
}

/* --- the command -------------------------------------------------------------- */

static const char about[] =
    "Asks tracegate-collector for a snapshot of its fleet (what every host's\n"
    "ring holds, merged into one trace in the collector's store) and waits\n"
    "until it is stored: POST /api/v1/snapshots?wait=1 with --reason and\n"
    "--group. ADDR is http://host:port, https://host:port or host:port (http).\n"
    "Over https:// the collector's certificate must be signed by --ca and\n"
    "carry its name (--tls-server-name for an IP address), and this\n"
    "certificate's identity needs the record role in the collector's authz\n"
    "file. Standard error gets one line (the snapshot's id, state, hosts and\n"
    "size) and one per failed host (the first " CLI_STR(FAILED_LINES_MAX)
    "); --json FILE gets the\n"
    "collector's reply as it came (\"-\": standard output), written only when it\n"
    "is a snapshot. The exit status is 0 when the snapshot is complete, 3 when\n"
    "it is partial (some hosts failed), 1 when it failed, was refused (over\n"
    "the collector's operator_snapshots_per_minute, an unknown group, no\n"
    "record role) or the collector could not be reached, 2 for a bad command\n"
    "line. '" CLI_PROG " snapshot get ID' downloads a stored one, or some of\n"
    "its hosts' part (see '" CLI_PROG " snapshot get --help'); '" CLI_PROG "\n"
    "snapshot check ID' says whether it imports into Perfetto's trace\n"
    "processor, and if not, whose part fails.\n"
    "\n"
    "examples:\n"
    "  " CLI_PROG " snapshot --collector 127.0.0.1:7468 --reason 'slow login'\n"
    "  " CLI_PROG " snapshot --collector https://collector.example:7468 "
    "--group web \\\n"
    "      --json snap.json --ca ca.pem --cert me.pem --key me.key\n";

/* --- snapshot get ----------------------------------------------------------- */

#define GET_PROG CLI_PROG " snapshot get"
/* What ?host= takes: the collector's hosts, 320 bytes each at most. */
#define HOSTS_ARG_MAX (1024u * 321u)

static const char get_about[] =
    "Downloads a stored snapshot's merged trace, or with --host only those\n"
    "hosts' part: the trace's head (the collector's clocks) and every packet\n"
    "of the hosts named, a valid trace of its own, read through the index\n"
    "written with the snapshot (GET /api/v1/snapshots/ID/trace?host=...).\n"
    "ID is the snapshot's " CLI_STR(CLI_SNAP_ID_LEN) " hexadecimal digits; H "
    "is a host as the snapshot's\n"
    "rows name it (its \"host\" field), several separated by commas. FILE is\n"
    "written whole or not at all ('-': standard output). The exit status is 0\n"
    "when the trace is written, 1 when the collector refused (no such\n"
    "snapshot or host: its reason is printed) or could not be reached, 2 for\n"
    "a bad command line.\n"
    "\n"
    "--pprof writes one host's CPU profile instead, pprof's profile.proto\n"
    "gzipped, made by the collector from that host's part (GET\n"
    "/api/v1/snapshots/ID/profile?host=H&format=pprof; docs/profiles.md).\n"
    "'" CLI_PROG " snapshot ID --pprof --host H ...' is the same command.\n"
    "\n"
    "--diff H writes host H against the median of the snapshot's other\n"
    "hosts instead, as JSON (GET /api/v1/snapshots/ID/profile/diff?host=H;\n"
    "docs/profiles.md, \"A host against its peers\"); with --pprof H's call\n"
    "tree as pprof, with --pprof --base the peers' median one (go tool\n"
    "pprof -diff_base=BASE H). --min-samples N sets the rule's minimum;\n"
    "--history N compares H with itself in its last N snapshots before ID\n"
    "(against=history&n=N) rather than with the other hosts.\n"
    "\n"
    "examples:\n"
    "  " CLI_PROG " snapshot get 000000000000002a --collector 127.0.0.1:7468 "
    "\\\n      --host web1.example:7467 --output web1.pftrace\n"
    "  " CLI_PROG " snapshot 000000000000002a --pprof --host web1.example:7467 "
    "\\\n      --collector 127.0.0.1:7468 -o web1.pb.gz\n"
    "  " CLI_PROG " snapshot 000000000000002a --diff web7.example:7467 "
    "\\\n      --collector 127.0.0.1:7468 -o web7-diff.json\n";

static int snapshot_get(int argc, char **argv) {
  bool pprof = false, base = false;
  const char *diff = NULL;
  uint64_t min_samples = 0, history = 0;
  snap_opts_t o;
  memset(&o, 0, sizeof(o));
  o.timeout_s = DEFAULT_TIMEOUT_S;
  const tg_flag_t flags[] = {
      {"collector", TG_FLAG_STRING, &o.collector, "ADDR",
       "tracegate-collector's HTTP API: http://host:port, https://host:port "
       "or host:port (http)", 0, 0},
      {"host", TG_FLAG_STRING, &o.host, "H[,H2...]",
       "only these hosts' part of the trace (default: the whole trace)", 0, 0},
      {"output", TG_FLAG_STRING, &o.output, "FILE",
       "-o: where the trace goes ('-': standard output)", 0, 0},
      {"timeout", TG_FLAG_SECONDS, &o.timeout_s, "DURATION",
       "give up (exit 1) when the download is not done by then", 1, 86400},
      {"pprof", TG_FLAG_BOOL, &pprof, NULL,
       "the --host's CPU profile (pprof, gzipped), not its trace", 0, 0},
      {"diff", TG_FLAG_STRING, &diff, "H",
       "host H against the median of the other hosts (JSON; --pprof: pprof)",
       0, 0},
      {"base", TG_FLAG_BOOL, &base, NULL,
       "with --diff --pprof: the peers' median profile (-diff_base)", 0, 0},
      {"history", TG_FLAG_UINT, &history, "N",
       "with --diff: against the host's own last N snapshots, not the other "
       "hosts (0: the others)", 0, 20},
      {"min-samples", TG_FLAG_UINT, &min_samples, "N",
       "with --diff: a host under N samples is too few (0: the rule's 100)", 0,
       1000000000},
      CLI_SNAP_TLS_FLAGS(o),
  };
  char *pos[1];
  size_t n_pos = 0;
  int rv = cli_parse_flags(GET_PROG,
                           "ID --collector ADDR [--host H[,H2...]] --output "
                           "FILE\n         [--pprof] [--diff H [--base] "
                           "[--min-samples N] [--history N]]\n         "
                           "[--timeout DURATION] "
                           "[--ca F --cert F --key F]",
                           get_about, flags, sizeof(flags) / sizeof(flags[0]),
                           argc, argv, pos, 1, &n_pos);
  if (rv == 1) return CLI_EXIT_OK;
  if (rv < 0) return CLI_EXIT_USAGE;
  collector_addr_t a;
  if (n_pos != 1 || !cli_snap_id_ok(pos[0])) {
    fprintf(stderr, "%s: ID (the snapshot's %d lowercase hexadecimal digits) "
            "is required (see --help)\n", GET_PROG, CLI_SNAP_ID_LEN);
    return CLI_EXIT_USAGE;
  }
  if (!o.output) {
    fprintf(stderr, "%s: --output FILE is required (see --help)\n", GET_PROG);
    return CLI_EXIT_USAGE;
  }
  if (o.host && (!o.host[0] || strlen(o.host) > HOSTS_ARG_MAX)) {
    fprintf(stderr, "%s: --host: 1 to %u bytes\n", GET_PROG, HOSTS_ARG_MAX);
    return CLI_EXIT_USAGE;
  }
  if (diff && (o.host || !diff[0] || strlen(diff) > HOSTS_ARG_MAX ||
               strchr(diff, ','))) {
    fprintf(stderr, "%s: --diff H names one host, without --host\n",
            GET_PROG);
    return CLI_EXIT_USAGE;
  }
  if ((base && (!diff || !pprof)) || ((min_samples || history) && !diff)) {
    fprintf(stderr, "%s: --base goes with --diff H --pprof, --min-samples "
            "and --history with --diff\n", GET_PROG);
    return CLI_EXIT_USAGE;
  }
  if (pprof && !diff && (!o.host || strchr(o.host, ','))) {
    fprintf(stderr, "%s: --pprof needs --host H, one host\n", GET_PROG);
    return CLI_EXIT_USAGE;
  }
  if (cli_snap_check_usage(GET_PROG, &o, &a) < 0) return CLI_EXIT_USAGE;

  size_t cap = sizeof(API_PATH "//profile/diff?host=&format=pprof&base=1"
                     "&min_samples=&against=history&n=") + 40 +
               CLI_SNAP_ID_LEN +
               (o.host ? 3 * strlen(o.host) : 0) +
               (diff ? 3 * strlen(diff) : 0) + 1;
  char *path = malloc(cap);
  if (!path) {
    fprintf(stderr, "%s: out of memory\n", GET_PROG);
    return CLI_EXIT_FAIL;
  }
  size_t len = (size_t)snprintf(path, cap, API_PATH "/%s/%s", pos[0],
                                diff ? "profile/diff" : pprof ? "profile"
                                                              : "trace");
  if (o.host || diff) {
    len += (size_t)snprintf(path + len, cap - len, "?host=");
    cli_snap_put_encoded(path, cap, &len, diff ? diff : o.host);
  }
  if (pprof) len += (size_t)snprintf(path + len, cap - len, "&format=pprof");
  if (base) len += (size_t)snprintf(path + len, cap - len, "&base=1");
  if (min_samples)
    len += (size_t)snprintf(path + len, cap - len, "&min_samples=%" PRIu64,
                            min_samples);
  if (history)
    len += (size_t)snprintf(path + len, cap - len,
                            "&against=history&n=%" PRIu64, history);

  /* Under a name of its own beside FILE, renamed when whole. */
  bool to_stdout = !strcmp(o.output, "-");
  char *tmp = NULL;
  int fd = STDOUT_FILENO;
  if (!to_stdout) {
    size_t tn = strlen(o.output) + sizeof(".partial");
    tmp = malloc(tn);
    if (tmp) snprintf(tmp, tn, "%s.partial", o.output);
    fd = tmp ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    if (fd < 0) {
      fprintf(stderr, "%s: cannot write %s: %s\n", GET_PROG,
              tmp ? tmp : o.output, tmp ? strerror(errno) : "out of memory");
      free(tmp);
      free(path);
      return CLI_EXIT_FAIL;
    }
  }
  req_t r;
  memset(&r, 0, sizeof(r));
  r.out_fd = fd;
  r.method = "GET";
  tg_buf_init(&r.body, CLI_SNAP_REPLY_MAX);
  int code = CLI_EXIT_FAIL;
  if (cli_snap_request(&o, &a, path, &r) == 0) {
    if (r.state != REQ_DONE)
      cli_snap_say_failed(GET_PROG, &o, &r);
    else if (r.status != 200)
      cli_snap_say_refused(GET_PROG, &r);
    else
      code = CLI_EXIT_OK;
  }
  if (!to_stdout) {
    if (code == CLI_EXIT_OK && (fsync(fd) != 0 || close(fd) != 0)) {
      fprintf(stderr, "%s: cannot write %s: %s\n", GET_PROG, tmp,
              strerror(errno));
      code = CLI_EXIT_FAIL;
    } else if (code != CLI_EXIT_OK) {
      close(fd);
    }
    if (code == CLI_EXIT_OK && rename(tmp, o.output) != 0) {
      fprintf(stderr, "%s: cannot rename %s to %s: %s\n", GET_PROG, tmp,
              o.output, strerror(errno));
      code = CLI_EXIT_FAIL;
    }
    if (code != CLI_EXIT_OK) unlink(tmp);
  }
  if (code == CLI_EXIT_OK)
    fprintf(stderr, CLI_PROG ": snapshot %s: %" PRIu64 " bytes%s written to "
            "%s\n", pos[0], r.out_bytes,
            diff ? (base ? " (the peers' median profile)"
                    : pprof ? " (the host's profile, to diff)"
                            : " (the host against its peers)")
            : pprof ? " (the host's profile)"
            : o.host ? " (the hosts' part)" : "",
            to_stdout ? "standard output" : o.output);
  tg_buf_free(&r.body);
  free(tmp);
  free(path);
  return code;
}

int cli_snapshot_main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "get"))
    return snapshot_get(argc - 1, argv + 1);
  /* `snapshot ID ...` (--pprof): a stored one, as `snapshot get ID`. */
  if (argc > 1 && cli_snap_id_ok(argv[1])) return snapshot_get(argc, argv);
  if (argc > 1 && !strcmp(argv[1], "check"))
    return cli_snapshot_check(argc - 1, argv + 1);
  snap_opts_t o;
  memset(&o, 0, sizeof(o));
  o.timeout_s = DEFAULT_TIMEOUT_S;
  const tg_flag_t flags[] = {
      {"collector", TG_FLAG_STRING, &o.collector, "ADDR",
       "tracegate-collector's HTTP API: http://host:port, https://host:port "
       "or host:port (http)", 0, 0},
      {"reason", TG_FLAG_STRING, &o.reason, "TEXT",
       "why, kept with the snapshot (at most " CLI_STR(REASON_MAX) " bytes)",
       0, 0},
      {"group", TG_FLAG_STRING, &o.group, "G",
       "only the hosts of this group of the collector's config (default: all)",
       0, 0},
      {"json", TG_FLAG_STRING, &o.json, "FILE",
       "write the collector's JSON reply to FILE ('-': standard output)", 0, 0},
      {"timeout", TG_FLAG_SECONDS, &o.timeout_s, "DURATION",
       "give up (exit 1) when the snapshot is not stored by then", 1, 86400},
      CLI_SNAP_TLS_FLAGS(o),
  };
  int rv = cli_parse_flags(PROG,
                           "--collector ADDR [--reason TEXT] [--group G] "
                           "[--json FILE]\n         [--timeout DURATION] "
                           "[--ca F --cert F --key F]",
                           about, flags, sizeof(flags) / sizeof(flags[0]), argc,
                           argv, NULL, 0, NULL);
  if (rv == 1) return CLI_EXIT_OK;
  if (rv < 0) return CLI_EXIT_USAGE;
  collector_addr_t a;
  if (cli_snap_check_usage(PROG, &o, &a) < 0) return CLI_EXIT_USAGE;

  /* Every byte of reason and group may become 3: room for the worst. */
  char path[sizeof(API_PATH "?wait=1&reason=&group=") + 3 * (REASON_MAX + GROUP_MAX)];
  size_t len = (size_t)snprintf(path, sizeof(path), API_PATH "?wait=1");
  if (o.reason) {
    len += (size_t)snprintf(path + len, sizeof(path) - len, "&reason=");
    cli_snap_put_encoded(path, sizeof(path), &len, o.reason);
  }
  if (o.group) {
    len += (size_t)snprintf(path + len, sizeof(path) - len, "&group=");
    cli_snap_put_encoded(path, sizeof(path), &len, o.group);
  }

  req_t r;
  memset(&r, 0, sizeof(r));
  r.out_fd = -1;
  r.method = "POST";
  tg_buf_init(&r.body, CLI_SNAP_REPLY_MAX);
  int code = CLI_EXIT_FAIL;
  if (cli_snap_request(&o, &a, path, &r) == 0) {
    if (r.state == REQ_DONE)
      code = answer(&o, &r);
    else
      cli_snap_say_failed(PROG, &o, &r);
  }
  tg_buf_free(&r.body);
  return code;
}
