/* The HTTP server's connections (http_internal.h): which are admitted,
 * counted by source address, and which make room for a new one. Policy
 * (admit(), idlest()) apart from effects (tg__http_on_accept()); no HTTP
 * here, and nothing of lws but the socket and the wsi it names.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "collector/http/http_internal.h"
#include "common/log.h"
#include "common/notice.h"

/* A refused connection is logged at most once per source (and once for
 * max_conns) per this interval; the counters count every one. */
#define REFUSED_WARN_INTERVAL_MS (60u * 1000)

/* Every loopback address is this one source (127.0.0.0, which no peer
 * has): 127.0.0.1 to 127.255.255.255 and ::1 are all this machine, where
 * any user may bind any of them. */
static const uint8_t loopback_key[4] = {127, 0, 0, 0};

static void key_set(tg_http_source_t *key, const void *addr, uint8_t len) {
  bool loopback = len == 4 ? ((const uint8_t *)addr)[0] == 127
                           : IN6_IS_ADDR_LOOPBACK((const struct in6_addr *)addr);
  if (loopback) {
    addr = loopback_key;
    len = 4;
  }
  memcpy(key->addr, addr, len);
  key->addr_len = len;
}

/* The peer of socket |fd| as a source address: an IPv4-mapped IPv6
 * address becomes its IPv4 address, so a dual-stack listener counts a
 * client the same whichever way it arrives; a loopback address becomes
 * loopback_key. 0, or -errno (the peer already gone: ENOTCONN), or
 * -EAFNOSUPPORT. */
static int source_of_fd(int fd, tg_http_source_t *key) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  memset(key, 0, sizeof(*key));
  if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0) return -errno;
  if (ss.ss_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
    key_set(key, &a->sin_addr, 4);
    return 0;
  }
  if (ss.ss_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr))
      key_set(key, &a->sin6_addr.s6_addr[12], 4);
    else
      key_set(key, &a->sin6_addr, 16);
    return 0;
  }
  return -EAFNOSUPPORT;
}

static void source_name(const tg_http_source_t *src, char *out, size_t n) {
  if (src->addr_len == 4 && !memcmp(src->addr, loopback_key, 4))
    snprintf(out, n, "loopback");
  else if (!inet_ntop(src->addr_len == 4 ? AF_INET : AF_INET6, src->addr, out,
                 (socklen_t)n))
    snprintf(out, n, "?");
}

/* The slot of |key|'s address, or NULL. With |take|, an address without
 * one gets a free slot (one never used first, so that a recently refused
 * address keeps its warning state); NULL then means no slot is free,
 * which n_conns <= 2 * max_conns rules out (at most max_conns counted
 * and max_conns evicted). */
static tg_http_source_t *source_find(tg_http_server_t *s,
                                     const tg_http_source_t *key, bool take) {
  tg_http_source_t *unused = NULL, *free_slot = NULL;
  for (unsigned i = 0; i < 2 * s->max_conns; i++) {
    tg_http_source_t *src = &s->sources[i];
    if (src->addr_len == key->addr_len &&
        !memcmp(src->addr, key->addr, key->addr_len))
      return src;
    if (src->addr_len == 0 && !unused) unused = src;
    if (src->n_conns == 0 && !free_slot) free_slot = src;
  }
  if (!take) return NULL;
  tg_http_source_t *src = unused ? unused : free_slot;
  if (src) *src = *key;
  return src;
}

typedef enum admit {
  ADMIT,
  REFUSE_STOPPING,
  REFUSE_MAX_CONNS,
  REFUSE_PER_SOURCE,
} admit_t;

/* Whether a new connection from |src| (NULL: an address with none open)
 * may be kept. Connections already evicted are on their way out (lws
 * frees them from the loop): they hold no slot. Pure: the caller counts
 * and logs. */
static admit_t admit(const tg_http_server_t *s, const tg_http_source_t *src) {
  if (s->state != TG_HTTP_RUNNING) return REFUSE_STOPPING;
  if (src && src->n_conns - src->n_evicted >= s->max_per_source)
    return REFUSE_PER_SOURCE;
  if (s->n_conns - s->n_evicted >= s->max_conns) return REFUSE_MAX_CONNS;
  return ADMIT;
}

/* The connection idle the longest (no exchange) from |src|, or from any
 * source when |src| is NULL; NULL when every one is busy. */
static tg_http_conn_t *idlest(tg_http_server_t *s, const tg_http_source_t *src) {
  tg_http_conn_t *best = NULL;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->conns) {
    tg_http_conn_t *c = TG_CONTAINER_OF(it, tg_http_conn_t, node);
    if (c->x || c->evicted || (src && c->src != src)) continue;
    if (!best || c->idle_since_ms < best->idle_since_ms) best = c;
  }
  return best;
}

/* Makes room for a new connection by closing |victim| (idle) now: lws
 * documents LWS_TO_KILL_SYNC for a wsi other than the one being serviced
 * (here the listener's). Its WSI_DESTROY comes later, from the loop, so
 * until then it is counted as evicted, holding no slot. */
static void evict(tg_http_server_t *s, tg_http_conn_t *victim,
                  const char *cap) {
  char name[INET6_ADDRSTRLEN];
  source_name(victim->src, name, sizeof(name));
  TG_DEBUG("http: %s: a connection from %s idle for %" PRIu64 " ms closed "
           "for a new one", cap, name, tg_clock_ms(s->clock) - victim->idle_since_ms);
  s->evicted++;
  victim->evicted = true;
  victim->src->n_evicted++;
  s->n_evicted++;
  lws_set_timeout(victim->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_SYNC);
}

/* Whether a warning is due for a refusal whose last warning was at
 * *warned_ms (0: never), and if so marks it given now. */
static bool warn_due(const tg_clock_t *clock, uint64_t *warned_ms) {
  uint64_t now = tg_clock_ms(clock);
  if (*warned_ms && now - *warned_ms < REFUSED_WARN_INTERVAL_MS) return false;
  *warned_ms = now ? now : 1;
  return true;
}

int tg__http_on_accept(tg_http_server_t *s, int fd) {
  if (!s) return 1;
  tg_http_source_t key;
  int rc = source_of_fd(fd, &key);
  if (rc < 0) {
    TG_DEBUG("http: a new connection without a peer address (%s): closed",
             strerror(-rc));
    return 1;
  }
  tg_http_source_t *src = source_find(s, &key, false);
  char name[INET6_ADDRSTRLEN];
  admit_t verdict = admit(s, src);
  /* A full listener or source still takes a new client: in place of the
   * connection idle the longest, which would otherwise hold its slot
   * until its timeout. */
  tg_http_conn_t *victim =
      s->n_evicted >= s->max_conns  ? NULL /* a burst: wait for the loop */
      : verdict == REFUSE_PER_SOURCE ? idlest(s, src)
      : verdict == REFUSE_MAX_CONNS  ? idlest(s, NULL)
                                     : NULL;
  if (victim) {
    evict(s, victim, verdict == REFUSE_PER_SOURCE ? "max_conns_per_source"
                                                  : "max_conns");
    src = source_find(s, &key, false);
    verdict = admit(s, src);
  }
  switch (verdict) {
    case ADMIT:
      return 0;
    case REFUSE_STOPPING:
      return 1;
    case REFUSE_PER_SOURCE:
      /* |src| is set: the address has max_per_source >= 1 open. */
      s->refused_per_source++;
      src->unwarned++;
      if (!warn_due(s->clock, &src->warned_ms)) return 1;
      source_name(src, name, sizeof(name));
      TG_WARN("%s http: %s has %u connections open, max_conns_per_source: "
              "%" PRIu64 " new one(s) from it closed since the last warning",
              TG_NOTE(COLLECTOR_HTTP_SOURCE_LIMIT), name, src->n_conns,
              src->unwarned);
      src->unwarned = 0;
      return 1;
    case REFUSE_MAX_CONNS:
      s->refused_max_conns++;
      s->max_conns_unwarned++;
      if (!warn_due(s->clock, &s->max_conns_warned_ms)) return 1;
      source_name(&key, name, sizeof(name));
      TG_WARN("%s http: %u connections open, max_conns: %" PRIu64 " new one(s) "
              "closed since the last warning (the latest from %s)",
              TG_NOTE(COLLECTOR_HTTP_MAX_CONNS), s->n_conns,
              s->max_conns_unwarned, name);
      s->max_conns_unwarned = 0;
      return 1;
  }
  return 1;
}

void tg__http_on_instantiated(tg_http_server_t *s, struct lws *wsi) {
  if (!s) return;
  tg_http_source_t key;
  int rc = source_of_fd((int)lws_get_socket_fd(wsi), &key);
  if (rc < 0) {
    TG_DEBUG("http: a new connection lost its peer address (%s)",
             strerror(-rc));
    return;
  }
  tg_http_conn_t *conn = calloc(1, sizeof(*conn));
  tg_http_source_t *src = conn ? source_find(s, &key, true) : NULL;
  if (!src) {
    free(conn);
    return;
  }
  conn->srv = s;
  conn->wsi = wsi;
  conn->src = src;
  conn->idle_since_ms = tg_clock_ms(s->clock);
  tg_list_insert_tail(&s->conns, &conn->node);
  src->n_conns++;
  s->n_conns++;
  lws_set_opaque_user_data(wsi, conn);
}

void tg__http_on_destroyed(struct lws *wsi) {
  tg_http_conn_t *conn = lws_get_opaque_user_data(wsi);
  if (!conn) return;
  tg__http_conn_drop_exchange(conn, "connection destroyed");
  tg_list_remove(&conn->node);
  if (conn->evicted) {
    conn->src->n_evicted--;
    conn->srv->n_evicted--;
  }
  conn->src->n_conns--;
  conn->srv->n_conns--;
  lws_set_opaque_user_data(wsi, NULL);
  free(conn);
}
