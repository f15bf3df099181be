/* Two tg_tls sessions talking through memory: see tls_pair.h. */
#include "tls_pair.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "common/buf.h"
#include "tracegate/error.h"

tg_tls_config_t *tls_pair_config(const char *dir, bool server,
                                 tg_tls_opts_t o) {
  char cert[256], key[256], ca[256];
  const char *name = server ? "relay.test" : "alice";
  snprintf(cert, sizeof(cert), "%s/pki/%s.pem", dir, name);
  snprintf(key, sizeof(key), "%s/pki/%s.key", dir, name);
  snprintf(ca, sizeof(ca), "%s/pki/ca.pem", dir);
  o.server = server;
  o.cert_file = cert;
  o.key_file = key;
  if (!o.ca_file) o.ca_file = ca;
  if (server && !o.ticket_lifetime_s) o.ticket_lifetime_s = 3600;
  tg_tls_config_t *c = NULL;
  char err[256];
  int rv = tg_tls_config_new(&o, &c, err, sizeof(err));
  if (rv) fprintf(stderr, "tg_tls_config_new: %s: %s\n", tg_strerror(rv), err);
  return c;
}

int tls_pair_carry(tg_tls_session_t *from, tg_tls_session_t *to) {
  tg_buf_t *out = tg_tls_out(from);
  if (tg_buf_size(out) == 0) return 0;
  int rv = tg_tls_feed(to, tg_buf_begin(out), tg_buf_size(out));
  tg_buf_reset(out);
  return rv;
}

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int timed_handshake(tg_tls_session_t *s, uint64_t *cpu_ns) {
  uint64_t t0 = thread_cpu_ns();
  int rv = tg_tls_handshake(s);
  *cpu_ns += thread_cpu_ns() - t0;
  return rv;
}

int tls_pair_handshake(tls_pair_t *p) {
  int cr = -EAGAIN, sr = -EAGAIN;
  for (int i = 0; i < 50; i++) {
    if (cr != 0) cr = timed_handshake(p->c, &p->c_cpu_ns);
    int rv = tls_pair_carry(p->c, p->s);
    if (rv) return rv;
    if (sr != 0) sr = timed_handshake(p->s, &p->s_cpu_ns);
    if ((rv = tls_pair_carry(p->s, p->c))) return rv;
    if (cr != 0 && cr != -EAGAIN) return cr;
    if (sr != 0 && sr != -EAGAIN) return sr;
    if (cr == 0 && sr == 0) return 0;
  }
  return -ETIMEDOUT;
}
