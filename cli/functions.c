/* SPDX-License-Identifier: Apache-2.0 */
/* `tracegate functions F --collector ADDR [--min-share X] [--host H]`: a
 * function's shares of its hosts' CPU across the collector's snapshots,
 * from its catalog (GET /api/v1/functions, collector/daemon/
 * api_functions.c; docs/collector.md, "Function shares"). No trace is
 * read. The request is snapshot_req.c's; every string of the reply
 * reaches the terminal through tg_printable(). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/json_out.h"
#include "cli/snapshot_req.h"
#include "common/printable.h"

#define PROG CLI_PROG " functions"
#define API_PATH "/api/v1/functions"
#define DEFAULT_TIMEOUT_S 60
/* The collector's bounds (catalog.h): a name, a host, a page. */
#define NAME_MAX_BYTES 1024
#define HOST_MAX_BYTES 320
#define LIMIT_MAX 1000

static const char about[] =
    "Says where function F took more than a share of its host's CPU, across\n"
    "the snapshots tracegate-collector stored (--min-share), or F's share on\n"
    "one host snapshot after snapshot (--host), from the function shares the\n"
    "collector keeps in its catalog (each host's top function_shares_top\n"
    "functions and its \"[rest]\"): no trace is read. F is compared byte for\n"
    "byte (a C++ name as the profile names it); pseudo names such as\n"
    "\"[unknown]\" and \"[no callstack]\" are functions here too.\n"
    "\n"
    "A share is of the host's CPU time in the snapshot (its samples times\n"
    "their period, so a boosted host's faster sampling weighs the same);\n"
    "'total' counts the samples whose stack holds F, 'self' those whose leaf\n"
    "is F. A host whose samples had no CPU-clock rate is shared by samples\n"
    "(basis \"samples\"). X is a percentage (\"5%\") or a fraction (\"0.05\").\n"
    "\n"
    "One line per row, newest snapshot first: the snapshot, the host, F's\n"
    "total and self share, its samples and the host's. --json FILE gets the\n"
    "collector's reply as it came (\"-\": standard output). A full page\n"
    "ends with the --after that continues it. The exit status is 0 when the\n"
    "collector answered (rows or none), 1 when it refused or could not be\n"
    "reached, 2 for a bad command line.\n"
    "\n"
    "examples:\n"
    "  " CLI_PROG " functions 'compress_block' --min-share 10% "
    "--collector 127.0.0.1:7468\n"
    "  " CLI_PROG " functions 'compress_block' --host web1.example:7467 "
    "\\\n      --collector 127.0.0.1:7468 --json shares.json\n";

/* "5%" (a percentage) or "0.05" (a fraction), whole, into 0..1. */
static int parse_share(const char *s, double *out) {
  if (!s[0] || strlen(s) > 32) return -EINVAL;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  bool percent = *end == '%' && end[1] == 0;
  if (errno || end == s || (*end && !percent) || !isfinite(v)) return -EINVAL;
  if (percent) v /= 100;
  if (!(v >= 0 && v <= 1)) return -EINVAL;
  *out = v;
  return 0;
}

static int put_body(FILE *f, const void *arg) {
  const req_t *r = arg;
  size_t n = tg_buf_size(&r->body);
  return fwrite(tg_buf_begin(&r->body), 1, n, f) == n ? 0 : -EIO;
}

static const char *text_of(const json_t *o, const char *key, char *buf,
                           size_t cap) {
  const char *s = json_string_value(json_object_get(o, key));
  tg_printable(buf, cap, s ? s : "?");
  return buf;
}

static long long int_of(const json_t *o, const char *key) {
  return (long long)json_integer_value(json_object_get(o, key));
}

/* The rows, one line each, on standard output (unless |quiet|: the JSON
 * goes there); the next page's --after on standard error. */
static int print_rows(const req_t *r, bool quiet) {
  json_error_t e;
  json_t *doc = json_loadb((const char *)tg_buf_begin(&r->body),
                           tg_buf_size(&r->body), 0, &e);
  json_t *rows = json_object_get(doc, "rows");
  if (!json_is_array(rows)) {
    fprintf(stderr, "%s: the collector's reply has no rows\n", PROG);
    json_decref(doc);
    return CLI_EXIT_FAIL;
  }
  json_t *by_samples = json_string("samples");
  size_t i;
  json_t *row;
  char snap[40], host[HOST_MAX_BYTES + 1], file[256], after[400];
  json_array_foreach(rows, i, row) {
    if (quiet) break;
    const char *f = json_string_value(json_object_get(row, "file"));
    if (f && f[0]) tg_printable(file, sizeof(file), f);
    printf("%s  %-24s  total %6.2f%%  self %6.2f%%  %lld/%lld samples%s%s%s%s\n",
           text_of(row, "snapshot", snap, sizeof(snap)),
           text_of(row, "host", host, sizeof(host)),
           100 * json_number_value(json_object_get(row, "total_share")),
           100 * json_number_value(json_object_get(row, "self_share")),
           int_of(row, "total_samples"), int_of(row, "host_samples"),
           f && f[0] ? "  " : "", f && f[0] ? file : "",
           json_is_true(json_object_get(row, "cut")) ? "  (name cut)" : "",
           json_equal(json_object_get(row, "basis"), by_samples)
               ? "  (by samples)"
               : "");
  }
  const char *next = json_string_value(json_object_get(doc, "next_after"));
  if (next) {
    tg_printable(after, sizeof(after), next);
    fprintf(stderr, "%s: more rows: --after '%s'\n", PROG, after);
  } else if (!json_array_size(rows)) {
    fprintf(stderr, "%s: no rows\n", PROG);
  }
  json_decref(by_samples);
  json_decref(doc);
  return CLI_EXIT_OK;
}

int cli_functions_main(int argc, char **argv) {
  snap_opts_t o;
  memset(&o, 0, sizeof(o));
  o.timeout_s = DEFAULT_TIMEOUT_S;
  const char *min_share = NULL, *by = NULL, *after = NULL;
  uint64_t limit = 0, from = 0, to = 0;
  const tg_flag_t flags[] = {
      {"collector", TG_FLAG_STRING, &o.collector, "ADDR",
       "tracegate-collector's HTTP API: http://host:port, https://host:port "
       "or host:port (http)", 0, 0},
      {"min-share", TG_FLAG_STRING, &min_share, "X",
       "only rows above this share (\"5%\" or \"0.05\")", 0, 0},
      {"host", TG_FLAG_STRING, &o.host, "H",
       "only this host (as the snapshots' rows name it)", 0, 0},
      {"by", TG_FLAG_STRING, &by, "total|self",
       "what --min-share is of: anywhere in the stack (default) or the leaf",
       0, 0},
      {"from", TG_FLAG_UINT, &from, "MS",
       "only snapshots started at or after this Unix time (milliseconds)", 0,
       INT64_MAX},
      {"to", TG_FLAG_UINT, &to, "MS",
       "only snapshots started before this Unix time (milliseconds)", 1,
       INT64_MAX},
      {"limit", TG_FLAG_UINT, &limit, "N", "rows in the page (default 100)", 1,
       LIMIT_MAX},
      {"after", TG_FLAG_STRING, &after, "CURSOR",
       "the page after the one that said so", 0, 0},
      {"json", TG_FLAG_STRING, &o.json, "FILE",
       "the collector's reply as it came ('-': standard output)", 0, 0},
      {"timeout", TG_FLAG_SECONDS, &o.timeout_s, "DURATION",
       "give up (exit 1) when there is no answer by then", 1, 3600},
      CLI_SNAP_TLS_FLAGS(o),
  };
  char *pos[1];
  size_t n_pos = 0;
  int rv = cli_parse_flags(PROG,
                           "F --collector ADDR [--min-share X] [--host H] "
                           "[--by total|self]\n         [--from MS] [--to MS] "
                           "[--limit N] [--after CURSOR] [--json FILE]",
                           about, flags, sizeof(flags) / sizeof(flags[0]),
                           argc, argv, pos, 1, &n_pos);
  if (rv == 1) return CLI_EXIT_OK;
  if (rv < 0) return CLI_EXIT_USAGE;
  if (n_pos != 1 || !pos[0][0] || strlen(pos[0]) > NAME_MAX_BYTES) {
    fprintf(stderr, "%s: F, a function's name of 1 to %d bytes, is required "
            "(see --help)\n", PROG, NAME_MAX_BYTES);
    return CLI_EXIT_USAGE;
  }
  double share = 0;
  if (min_share && parse_share(min_share, &share) < 0) {
    fprintf(stderr, "%s: --min-share: a percentage (\"5%%\") or a fraction "
            "(\"0.05\") of 0 to 100%%\n", PROG);
    return CLI_EXIT_USAGE;
  }
  if (by && strcmp(by, "total") && strcmp(by, "self")) {
    fprintf(stderr, "%s: --by: total or self\n", PROG);
    return CLI_EXIT_USAGE;
  }
  if (o.host && (!o.host[0] || strlen(o.host) > HOST_MAX_BYTES)) {
    fprintf(stderr, "%s: --host: 1 to %d bytes\n", PROG, HOST_MAX_BYTES);
    return CLI_EXIT_USAGE;
  }
  if (after && strlen(after) > 400) {
    fprintf(stderr, "%s: --after: what a page said, 400 bytes at most\n",
            PROG);
    return CLI_EXIT_USAGE;
  }
  collector_addr_t a;
  if (cli_snap_check_usage(PROG, &o, &a) < 0) return CLI_EXIT_USAGE;

  /* Every text percent-encoded (3 bytes a byte at most). */
  size_t cap = sizeof(API_PATH) + 256 + 3 * strlen(pos[0]) +
               (o.host ? 3 * strlen(o.host) : 0) +
               (after ? 3 * strlen(after) : 0);
  char *path = malloc(cap);
  if (!path) {
    fprintf(stderr, "%s: out of memory\n", PROG);
    return CLI_EXIT_FAIL;
  }
  size_t len = (size_t)snprintf(path, cap, API_PATH "?name=");
  cli_snap_put_encoded(path, cap, &len, pos[0]);
  if (o.host) {
    len += (size_t)snprintf(path + len, cap - len, "&host=");
    cli_snap_put_encoded(path, cap, &len, o.host);
  }
  /* %.17g: the double read back is the one parsed. */
  if (min_share)
    len += (size_t)snprintf(path + len, cap - len, "&min_share=%.17g", share);
  if (by) len += (size_t)snprintf(path + len, cap - len, "&by=%s", by);
  if (from) len += (size_t)snprintf(path + len, cap - len, "&from=%" PRIu64, from);
  if (to) len += (size_t)snprintf(path + len, cap - len, "&to=%" PRIu64, to);
  if (limit)
    len += (size_t)snprintf(path + len, cap - len, "&limit=%" PRIu64, limit);
  if (after) {
    len += (size_t)snprintf(path + len, cap - len, "&after=");
    cli_snap_put_encoded(path, cap, &len, after);
  }

  req_t r;
  memset(&r, 0, sizeof(r));
  r.out_fd = -1;
  r.method = "GET";
  tg_buf_init(&r.body, CLI_SNAP_REPLY_MAX);
  int code = CLI_EXIT_FAIL;
  if (cli_snap_request(&o, &a, path, &r) == 0) {
    if (r.state != REQ_DONE) {
      cli_snap_say_failed(PROG, &o, &r);
    } else if (r.status != 200) {
      cli_snap_say_refused(PROG, &r);
    } else {
      code = print_rows(&r, o.json && !strcmp(o.json, "-"));
      if (code == CLI_EXIT_OK && o.json &&
          (rv = cli_json_file_write(o.json, put_body, &r)) < 0) {
        fprintf(stderr, "%s: --json %s: %s\n", PROG, o.json, strerror(-rv));
        code = CLI_EXIT_FAIL;
      }
    }
  }
  tg_buf_free(&r.body);
  free(path);
  return code;
}
