/* SPDX-License-Identifier: Apache-2.0 */
/* What api.c shares with the API's other files (api_profile.c): its JSON
 * answers and the plan of some hosts' part of a snapshot. Not for outside
 * the HTTP API. */
#ifndef TRACEGATE_COLLECTOR_DAEMON_API_INTERNAL_H
#define TRACEGATE_COLLECTOR_DAEMON_API_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "collector/daemon/coll.h"
#include "collector/http/http.h"

/* Answers |x| with |doc| (taken; NULL: out of memory, a 500). */
void coll_api_respond_json(tg_http_exchange_t *x, int status, json_t *doc);
/* Answers |x| with {"error": why}. */
void coll_api_json_error(tg_http_exchange_t *x, int status, const char *why);

/* Where the part of some hosts of a snapshot lies (docs/collector.md,
 * "One host's part"): extents of the trace (ext[i].second false) and of
 * its symbols (true), in the order they are served. */
typedef struct coll_part {
  tg_http_extent_t *ext; /* malloc'd: the caller frees */
  size_t n_ext;
  size_t n_hosts, n_index_hosts;
  uint64_t bytes; /* of the trace */
  char first[TG_COLL_HOST_MAX + 1]; /* the first host named */
  /* Its place in the snapshot's host index: the merge's host k, whose
   * packets are machine k + 1 of the trace (consumer/fleet/merge.h). */
  size_t first_index;
} coll_part_t;

/* The part of |list|'s hosts (comma-separated names) of snapshot |id|,
 * whose trace is |size| bytes, whose host index is |ifd| (taken: closed
 * here) or, when negative, the error getting it gave (-ENOENT: it has
 * none), and whose symbols are |sfd| and their index |sifd| (-1: none;
 * neither taken). 0 with *part filled; -1 after answering |x| with why
 * not (400, 404, 409, 500, 503), or without an answer when |x| is NULL. */
int coll_api_plan_part(coll_t *c, tg_http_exchange_t *x, uint64_t id,
                       const char *list, uint64_t size, int ifd, int sfd,
                       int sifd, coll_part_t *part);
/* Snapshot |id|'s host index opened where the store keeps it in place (a
 * directory's): its descriptor, or the negative error (-ENOENT: none), as
 * coll_api_plan_part takes it. */
int coll_api_open_index(coll_t *c, uint64_t id);

/* GET /api/v1/snapshots/ID/profile (api_profile.c). */
void coll_api_get_profile(coll_t *c, tg_http_exchange_t *x,
                          const tg_http_request_t *r, uint64_t id);
/* GET /api/v1/snapshots/ID/profile/diff (api_profile.c). */
void coll_api_get_profile_diff(coll_t *c, tg_http_exchange_t *x,
                               const tg_http_request_t *r, uint64_t id);
/* |x| went away: a profile being made for it is not sent. */
void coll_api_profile_abandon(coll_t *c, tg_http_exchange_t *x);

/* GET /api/v1/functions (api_functions.c). */
void coll_api_get_functions(coll_t *c, tg_http_exchange_t *x,
                            const tg_http_request_t *r, uint64_t no_id);

#endif /* TRACEGATE_COLLECTOR_DAEMON_API_INTERNAL_H */
