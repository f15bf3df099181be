/* SPDX-License-Identifier: Apache-2.0 */
/* The catalog's two questions of function shares (issue 80 point 3;
 * catalog.h, find_shares) at the size the issue sets: SNAPSHOTS
 * snapshots of HOSTS hosts, each host with TOP functions and its rest,
 * in a fresh SQLite catalog and, when PostgreSQL's server programs are
 * installed, a fresh PostgreSQL one (tests/collector/coll_pg.h: a server
 * of its own in a temporary directory). Each question is asked whole
 * (every page of TG_COLL_SHARES_LIST_MAX rows) several times; the worst
 * time is printed beside the 1 s goal.
 *
 *   "F above X%":        function fn_7 above 5% of its host's CPU
 *   "F on H over time":  fn_7 on host-0042, every snapshot
 *
 *   bench_function_shares [SNAPSHOTS [HOSTS [TOP]]]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "coll_pg.h"
#include "collector/catalog/catalog.h"
#include "collector/catalog/catalog_pg.h"
#include "collector/catalog/catalog_sqlite.h"
#include "test_proc.h"

#define GOAL_S 1.0
#define ROUNDS 5
#define FUNCTION "fn_7"
#define HOST "host-0042"

static void usage(FILE *f) {
  fprintf(f, "usage: bench_function_shares [SNAPSHOTS [HOSTS [TOP]]]\n"
             "  the catalog's function-share questions over SNAPSHOTS x HOSTS "
             "x (TOP + 1) rows\n  (defaults: 100 snapshots, 100 hosts, top "
             "50), SQLite and PostgreSQL\n");
}

/* Fills |cat|: each snapshot's hosts, then their shares. fn_R is host
 * h's rank R with a total share falling with R; fn_7's varies with the
 * snapshot and host, between 1% and 13%, so about two thirds of the
 * hosts are above 5%. */
static int fill(tg_coll_catalog_t *cat, uint64_t snapshots, uint64_t hosts,
                uint64_t top) {
  char (*names)[16] = calloc(hosts, sizeof(*names));
  char (*fns)[16] = calloc(top, sizeof(*fns));
  tg_coll_host_result_t *hr = calloc(hosts, sizeof(*hr));
  tg_coll_host_shares_t *hs = calloc(hosts, sizeof(*hs));
  tg_coll_share_in_t *rows = calloc(hosts * (top + 1), sizeof(*rows));
  int err = names && fns && hr && hs && rows ? 0 : -ENOMEM;
  for (uint64_t h = 0; !err && h < hosts; h++) {
    snprintf(names[h], sizeof(names[h]), "host-%04u", (unsigned)h);
    hr[h] = (tg_coll_host_result_t){.host = names[h]};
  }
  for (uint64_t r = 0; !err && r < top; r++)
    snprintf(fns[r], sizeof(fns[r]), "fn_%u", (unsigned)r);
  for (uint64_t s = 0; !err && s < snapshots; s++) {
    tg_coll_begin_t b = {.trigger = "bench"};
    uint64_t id;
    if ((err = cat->ops->begin(cat, &b, (int64_t)s * 1000, &id))) break;
    tg_coll_finish_t f = {.bytes = 1, .hosts = hr, .n_hosts = hosts,
                          .finished_ms = (int64_t)s * 1000 + 1};
    if ((err = cat->ops->finish(cat, id, &f))) break;
    for (uint64_t h = 0; h < hosts; h++) {
      tg_coll_share_in_t *hr_rows = &rows[h * (top + 1)];
      const uint64_t whole = 1000000;
      uint64_t used = 0;
      for (uint64_t r = 0; r < top; r++) {
        uint64_t total = r == 7 ? 10000 + ((s * 31 + h * 17) % 13) * 10000
                                : whole / (r + 2);
        uint64_t self = total / 4;
        used += self;
        hr_rows[r] = (tg_coll_share_in_t){.function = fns[r],
                                          .self_ns = self,
                                          .total_ns = total,
                                          .self_samples = self / 1000,
                                          .total_samples = total / 1000};
      }
      uint64_t rest = whole > used ? whole - used : 0;
      hr_rows[top] = (tg_coll_share_in_t){.function = "[rest]",
                                          .kind = TG_COLL_SHARE_REST,
                                          .self_ns = rest,
                                          .total_ns = rest};
      hs[h] = (tg_coll_host_shares_t){.host = names[h], .cpu_ns = whole,
                                      .samples = whole / 1000,
                                      .rows = hr_rows, .n_rows = top + 1};
    }
    err = cat->ops->set_shares(cat, id, hs, hosts);
  }
  free(names);
  free(fns);
  free(hr);
  free(hs);
  free(rows);
  return err;
}

/* Every page of |q|'s answer: the rows in *n, the worst of ROUNDS. */
static int ask(tg_coll_catalog_t *cat, tg_coll_share_query_t q, size_t *n,
               double *worst) {
  tg_coll_share_t *page = malloc(TG_COLL_SHARES_LIST_MAX * sizeof(*page));
  if (!page) return -ENOMEM;
  static char host[TG_COLL_HOST_MAX + 1];
  int err = 0;
  *worst = 0;
  for (int round = 0; !err && round < ROUNDS; round++) {
    tg_coll_share_query_t p = q;
    size_t total = 0, got = 0;
    double t0 = bench_wall_s();
    do {
      err = cat->ops->find_shares(cat, &p, page, TG_COLL_SHARES_LIST_MAX,
                                  &got);
      if (err || !got) break;
      total += got;
      p.after_id = page[got - 1].snapshot_id;
      snprintf(host, sizeof(host), "%s", page[got - 1].host);
      p.after_host = host;
      p.after_rank = page[got - 1].rank;
    } while (got == TG_COLL_SHARES_LIST_MAX);
    double t = bench_wall_s() - t0;
    if (t > *worst) *worst = t;
    *n = total;
  }
  free(page);
  return err;
}

static int run(const char *kind, tg_coll_catalog_t *cat, uint64_t snapshots,
               uint64_t hosts, uint64_t top) {
  double t0 = bench_wall_s();
  int err = fill(cat, snapshots, hosts, top);
  if (err) {
    fprintf(stderr, "bench_function_shares: %s: fill: %s\n", kind,
            strerror(-err));
    return -1;
  }
  printf("%-10s fill: %llu rows in %.1f s\n", kind,
         (unsigned long long)(snapshots * hosts * (top + 1)), bench_wall_s() - t0);
  tg_coll_share_query_t q = TG_COLL_SHARE_QUERY_INIT;
  q.function = FUNCTION;
  q.min_share = 0.05;
  size_t n;
  double worst;
  if ((err = ask(cat, q, &n, &worst))) goto fail;
  printf("%-10s \"" FUNCTION " above 5%%\": %zu rows in %.4f s (worst of %d; "
         "goal < %.1f s)%s\n",
         kind, n, worst, ROUNDS, GOAL_S, worst < GOAL_S ? "" : "  MISSED");
  q = (tg_coll_share_query_t)TG_COLL_SHARE_QUERY_INIT;
  q.function = FUNCTION;
  q.host = HOST;
  if ((err = ask(cat, q, &n, &worst))) goto fail;
  printf("%-10s \"" FUNCTION " on " HOST " over time\": %zu rows in %.4f s "
         "(worst of %d; goal < %.1f s)%s\n",
         kind, n, worst, ROUNDS, GOAL_S, worst < GOAL_S ? "" : "  MISSED");
  return 0;
fail:
  fprintf(stderr, "bench_function_shares: %s: query: %s\n", kind,
          strerror(-err));
  return -1;
}

int main(int argc, char **argv) {
  uint64_t snapshots = 100, hosts = 100, top = 50;
  const bench_arg_t args[] = {{"SNAPSHOTS", 1, 100000, &snapshots},
                              {"HOSTS", 1, 4096, &hosts},
                              {"TOP", 8, TG_COLL_SHARES_TOP_MAX, &top}};
  int rv = bench_args_parse("bench_function_shares", argc, argv, args, 3,
                            usage, NULL);
  if (rv) return rv > 0 ? 0 : 2;
  int failed = 0;
  char dir[256], path[512];
  if (tg_test_mkdtemp(dir, sizeof(dir), "bench-shares") < 0) return 1;
  snprintf(path, sizeof(path), "%s/catalog.sqlite", dir);
  tg_coll_catalog_t *cat = NULL;
  if (tg_coll_catalog_sqlite_open(path, &cat) != 0 ||
      run("sqlite", cat, snapshots, hosts, top) < 0)
    failed = 1;
  tg_coll_catalog_close(cat);
  tg_test_rm_rf(dir);

  if (!coll_pg_installed()) {
    printf("postgresql: not run (PostgreSQL's server programs are not "
           "installed)\n");
    return failed;
  }
  coll_pg_server_t pg;
  memset(&pg, 0, sizeof(pg));
  char conninfo[512];
  cat = NULL;
  if (coll_pg_start(&pg) != 0 ||
      coll_pg_createdb(&pg, conninfo, sizeof(conninfo)) != 0 ||
      tg_coll_catalog_pg_open(conninfo, 0, &cat) != 0 ||
      run("postgresql", cat, snapshots, hosts, top) < 0)
    failed = 1;
  tg_coll_catalog_close(cat);
  coll_pg_stop(&pg);
  return failed;
}
