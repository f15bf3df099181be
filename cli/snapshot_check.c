/* `tracegate snapshot check ID --collector ADDR`: does a stored snapshot
 * import into Perfetto's trace processor, and if not, whose part fails?
 *
 * The merge writes each host's packets with that host's machine id and
 * sequence ids of its own (docs/merge.md), so what one host slipped past
 * the merge spoils its own part, which can be read alone (GET
 * /api/v1/snapshots/ID/trace?host=H, docs/collector.md "One host's
 * part"). The check downloads the whole trace into a private directory
 * and imports it into the trace processor the operator names; only when
 * that fails does it download and import each host's part, one at a time
 * (each file deleted after its import), and name the hosts whose part
 * fails with trace processor's own words.
 *
 * Each import is common/tp_import.h's: a child under an address-space
 * limit (a hostile part can ask for gigabytes) and a deadline.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "common/json.h"
#include "common/tp_import.h"
#include "cli/json_out.h"
#include "cli/snapshot_json.h"
#include "cli/snapshot_req.h"

#define CHECK_PROG CLI_PROG " snapshot check"
#define DEFAULT_TIMEOUT_S 300
#define DEFAULT_IMPORT_TIMEOUT_S 600
#define DEFAULT_IMPORT_MEMORY (8ull << 30)
/* The exit status when the whole trace fails and no host's part alone
 * does: the fault is in how the parts meet, or the head's. */
#define CHECK_EXIT_NO_HOST 4

/* --- downloads ----------------------------------------------------------------- */

typedef struct tp_opts {
  const char *path; /* a path, or a name looked up on PATH */
  uint64_t timeout_s;
  uint64_t memory; /* RLIMIT_AS bytes; 0: none */
} tp_opts_t;

typedef tg_tp_verdict_t verdict_t;

typedef struct check {
  snap_opts_t o;
  collector_addr_t a;
  tp_opts_t tp;
  const char *id;
  char dir[64]; /* the private directory: mkdtemp */
} check_t;

/* GET |path| into |file| (or, |file| NULL, the reply into |body|). 0, or
 * -1 having said why. */
static int fetch(const check_t *c, const char *path, const char *file,
                 tg_buf_t *body) {
  req_t r;
  memset(&r, 0, sizeof(r));
  r.method = "GET";
  r.out_fd = -1;
  if (file) {
    r.out_fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (r.out_fd < 0) {
      fprintf(stderr, "%s: cannot write %s: %s\n", CHECK_PROG, file,
              strerror(errno));
      return -1;
    }
  }
  tg_buf_init(&r.body, CLI_SNAP_REPLY_MAX);
  int rv = -1;
  if (cli_snap_request(&c->o, &c->a, path, &r) == 0) {
    if (r.state != REQ_DONE)
      cli_snap_say_failed(CHECK_PROG, &c->o, &r);
    else if (r.status != 200)
      cli_snap_say_refused(CHECK_PROG, &r);
    else
      rv = 0;
  }
  if (file && close(r.out_fd) != 0 && rv == 0) {
    fprintf(stderr, "%s: cannot write %s: %s\n", CHECK_PROG, file,
            strerror(errno));
    rv = -1;
  }
  if (body && rv == 0) {
    *body = r.body;
  } else {
    tg_buf_free(&r.body);
  }
  return rv;
}

/* Downloads the whole trace (|host| NULL) or |host|'s part and imports
 * it; the file is deleted after. 0, or -1 having said why (the download
 * failed: no verdict). */
static int check_one(const check_t *c, const char *host, verdict_t *v) {
  size_t cap = sizeof(CLI_SNAP_API_PATH "//trace?host=") + 16 +
               (host ? 3 * strlen(host) : 0) + 1;
  char *path = malloc(cap), file[96];
  if (!path) {
    fprintf(stderr, "%s: out of memory\n", CHECK_PROG);
    return -1;
  }
  size_t len = (size_t)snprintf(path, cap, CLI_SNAP_API_PATH "/%s/trace", c->id);
  if (host) {
    len += (size_t)snprintf(path + len, cap - len, "?host=");
    cli_snap_put_encoded(path, cap, &len, host);
  }
  snprintf(file, sizeof(file), "%s/%s.pftrace", c->dir, host ? "part" : "whole");
  int rv = fetch(c, path, file, NULL);
  free(path);
  if (rv == 0) {
    tg_tp_limits_t lim = {.timeout_ms = c->tp.timeout_s * 1000u,
                          .memory = c->tp.memory};
    tg_tp_import(c->tp.path, file, &lim, v);
  }
  unlink(file);
  return rv;
}

/* --- the report ---------------------------------------------------------------- */

typedef struct host_verdict {
  const char *host;
  verdict_t v;
} host_verdict_t;

static json_t *verdict_json(const verdict_t *v) {
  json_t *o = json_object();
  if (!o) return NULL;
  json_object_set_new(o, "imports", json_boolean(v->failure == TG_TP_OK));
  if (v->failure != TG_TP_OK) {
    json_object_set_new(o, "failure", json_string(tg_tp_failure_name(v->failure)));
    json_object_set_new(o, "why", tg_json_text(v->why));
  }
  return o;
}

static json_t *report_json(const check_t *c, const verdict_t *whole,
                           const host_verdict_t *hv, size_t n, bool parts) {
  json_t *doc = json_object(), *hosts = json_array(), *failing = json_array();
  if (!doc || !hosts || !failing) {
    json_decref(doc);
    json_decref(hosts);
    json_decref(failing);
    return NULL;
  }
  json_object_set_new(doc, "id", json_string(c->id));
  json_object_set_new(doc, "trace_processor", tg_json_text(c->tp.path));
  json_object_set_new(doc, "whole", verdict_json(whole));
  json_object_set_new(doc, "parts_checked", json_boolean(parts));
  for (size_t i = 0; parts && i < n; i++) {
    json_t *h = verdict_json(&hv[i].v);
    if (!h) continue;
    json_object_set_new(h, "host", tg_json_text(hv[i].host));
    if (hv[i].v.failure != TG_TP_OK) {
      json_t *p = json_object();
      json_object_set_new(p, "kind", json_string("import"));
      char code[16];
      snprintf(code, sizeof(code), "TG-%d", (int)TG_N_SNAPSHOT_PART_FAILS);
      json_object_set_new(p, "code", json_string(code));
      json_object_set_new(p, "why", tg_json_text(hv[i].v.why));
      json_object_set_new(h, "problem", p);
      json_array_append_new(failing, tg_json_text(hv[i].host));
    }
    json_array_append_new(hosts, h);
  }
  json_object_set_new(doc, "hosts", hosts);
  json_object_set_new(doc, "failing", failing);
  return doc;
}

/* --- the command --------------------------------------------------------------- */

static const char about[] =
    "Checks that a stored snapshot imports into Perfetto's trace processor,\n"
    "and if it does not, which hosts' part fails. It downloads the whole\n"
    "trace (GET /api/v1/snapshots/ID/trace) into a private temporary\n"
    "directory and imports it into --trace-processor (trace_processor_shell\n"
    "from Perfetto, looked up on PATH unless a path is given). When that\n"
    "fails, it downloads each host's part (?host=H: the trace's head and that\n"
    "host's packets) and imports each alone. Every import runs under\n"
    "--import-memory (its address space) and --import-timeout (then it is\n"
    "killed); each file is deleted after its import. Standard error gets the\n"
    "whole trace's verdict and, when the parts were checked, one line per\n"
    "host whose part fails, with trace processor's error; --json FILE gets it\n"
    "all (\"-\": standard output; the fields are in docs/commands.md). The\n"
    "exit status is 0 when the whole trace imports, 3 when it does not and\n"
    "the hosts named fail alone, 4 when it does not and every host's part\n"
    "imports alone, 1 when the check could not be made (the collector\n"
    "refused or could not be reached, a part could not be downloaded, the\n"
    "trace processor could not be started), 2 for a bad command line.\n"
    "\n"
    "examples:\n"
    "  " CLI_PROG " snapshot check 000000000000002a --collector 127.0.0.1:7468\n"
    "  " CLI_PROG " snapshot check 000000000000002a --collector 127.0.0.1:7468 "
    "\\\n      --trace-processor ~/perfetto/trace_processor_shell --json -\n";

static void remove_dir(const char *dir) {
  if (dir[0]) rmdir(dir);
}

static int run(check_t *c) {
  /* The snapshot's rows: its hosts, as ?host= names them. */
  tg_buf_t body;
  char path[sizeof(CLI_SNAP_API_PATH "/") + 17];
  snprintf(path, sizeof(path), CLI_SNAP_API_PATH "/%s", c->id);
  if (fetch(c, path, NULL, &body) < 0) return CLI_EXIT_FAIL;
  char **names = NULL, err[160];
  size_t n = 0;
  size_t len = tg_buf_size(&body);
  int rv = cli_snap_host_names(len ? (const char *)tg_buf_begin(&body) : "",
                               len, &names, &n, err, sizeof(err));
  tg_buf_free(&body);
  if (rv < 0) {
    fprintf(stderr, "%s: the collector's reply is not a snapshot's hosts: %s\n",
            CHECK_PROG, err);
    return CLI_EXIT_FAIL;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(c->dir, sizeof(c->dir), "%s/tg-check-XXXXXX",
           tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
  if (!mkdtemp(c->dir)) {
    fprintf(stderr, "%s: cannot make a directory %s: %s\n", CHECK_PROG, c->dir,
            strerror(errno));
    c->dir[0] = 0;
    cli_snap_names_free(names, n);
    return CLI_EXIT_FAIL;
  }
  host_verdict_t *hv = calloc(n ? n : 1, sizeof(*hv));
  verdict_t whole;
  int code = CLI_EXIT_FAIL;
  bool parts = false;
  size_t failing = 0;
  if (!hv) {
    fprintf(stderr, "%s: out of memory\n", CHECK_PROG);
    goto out;
  }
  if (check_one(c, NULL, &whole) < 0) goto out;
  if (whole.failure == TG_TP_NOT_RUN) {
    fprintf(stderr, "%s: %s\n", CHECK_PROG, whole.why);
    goto out;
  }
  char sid[CLI_SNAP_ID_LEN + 1];
  snprintf(sid, sizeof(sid), "%s", c->id);
  if (whole.failure == TG_TP_OK) {
    fprintf(stderr, "%s: %s snapshot %s: trace processor imports it\n",
            CLI_PROG, tg_notice_tag(TG_N_SNAPSHOT_IMPORTS), sid);
    code = CLI_EXIT_OK;
  } else {
    fprintf(stderr, "%s: %s snapshot %s: trace processor cannot import it "
            "(%s): %s; checking its %zu hosts' parts\n", CLI_PROG,
            tg_notice_tag(TG_N_SNAPSHOT_DOES_NOT_IMPORT), sid,
            tg_tp_failure_name(whole.failure), whole.why, n);
    parts = true;
    for (size_t i = 0; i < n; i++) {
      hv[i].host = names[i];
      if (check_one(c, names[i], &hv[i].v) < 0) goto out;
      if (hv[i].v.failure == TG_TP_NOT_RUN) {
        fprintf(stderr, "%s: %s\n", CHECK_PROG, hv[i].v.why);
        goto out;
      }
      if (hv[i].v.failure == TG_TP_OK) continue;
      char host[CLI_SNAP_HOST_MAX + 1];
      tg_printable(host, sizeof(host), names[i]);
      fprintf(stderr, "%s: %s snapshot %s host %s: its part fails (%s): %s\n",
              CLI_PROG, tg_notice_tag(TG_N_SNAPSHOT_PART_FAILS), sid, host,
              tg_tp_failure_name(hv[i].v.failure), hv[i].v.why);
      failing++;
    }
    if (failing) {
      code = CLI_EXIT_PARTIAL;
    } else {
      fprintf(stderr, "%s: %s snapshot %s: every host's part imports alone; "
              "only the whole trace fails\n", CLI_PROG,
              tg_notice_tag(TG_N_SNAPSHOT_NO_HOST_FAILS), sid);
      code = CHECK_EXIT_NO_HOST;
    }
  }
  if (c->o.json) {
    json_t *doc = report_json(c, &whole, hv, n, parts);
    if (!doc || cli_json_doc_write(c->o.json, doc, JSON_COMPACT) != 0) {
      fprintf(stderr, "%s: --json %s: cannot write the report\n", CHECK_PROG,
              c->o.json);
      code = CLI_EXIT_FAIL;
    }
    json_decref(doc);
  }
out:
  free(hv);
  cli_snap_names_free(names, n);
  remove_dir(c->dir);
  return code;
}

int cli_snapshot_check(int argc, char **argv) {
  check_t c;
  memset(&c, 0, sizeof(c));
  c.o.timeout_s = DEFAULT_TIMEOUT_S;
  c.tp.path = "trace_processor_shell";
  c.tp.timeout_s = DEFAULT_IMPORT_TIMEOUT_S;
  c.tp.memory = DEFAULT_IMPORT_MEMORY;
  const tg_flag_t flags[] = {
      {"collector", TG_FLAG_STRING, &c.o.collector, "ADDR",
       "tracegate-collector's HTTP API: http://host:port, https://host:port "
       "or host:port (http)", 0, 0},
      {"trace-processor", TG_FLAG_STRING, &c.tp.path, "PATH",
       "Perfetto's trace_processor_shell: a path, or a name looked up on "
       "PATH", 0, 0},
      {"import-timeout", TG_FLAG_SECONDS, &c.tp.timeout_s, "DURATION",
       "one import's limit: then trace processor is killed and the trace "
       "fails", 1, 86400},
      {"import-memory", TG_FLAG_BYTES, &c.tp.memory, "SIZE",
       "one import's address space (setrlimit RLIMIT_AS; 0: no limit)", 0,
       0},
      {"json", TG_FLAG_STRING, &c.o.json, "FILE",
       "write the verdicts as JSON to FILE ('-': standard output)", 0, 0},
      {"timeout", TG_FLAG_SECONDS, &c.o.timeout_s, "DURATION",
       "give up (exit 1) when one download is not done by then", 1, 86400},
      CLI_SNAP_TLS_FLAGS(c.o),
  };
  char *pos[1];
  size_t n_pos = 0;
  int rv = cli_parse_flags(CHECK_PROG,
                           "ID --collector ADDR [--trace-processor PATH] "
                           "[--json FILE]\n         [--import-timeout DURATION] "
                           "[--import-memory SIZE] [--timeout DURATION]\n"
                           "         [--ca F --cert F --key F]",
                           about, flags, sizeof(flags) / sizeof(flags[0]), argc,
                           argv, pos, 1, &n_pos);
  if (rv == 1) return CLI_EXIT_OK;
  if (rv < 0) return CLI_EXIT_USAGE;
  if (n_pos != 1 || !cli_snap_id_ok(pos[0])) {
    fprintf(stderr, "%s: ID (the snapshot's %d lowercase hexadecimal digits) "
            "is required (see --help)\n", CHECK_PROG, CLI_SNAP_ID_LEN);
    return CLI_EXIT_USAGE;
  }
  if (!c.tp.path[0]) {
    fprintf(stderr, "%s: --trace-processor: a path or a name\n", CHECK_PROG);
    return CLI_EXIT_USAGE;
  }
  if (cli_snap_check_usage(CHECK_PROG, &c.o, &c.a) < 0) return CLI_EXIT_USAGE;
  c.id = pos[0];
  return run(&c);
}
