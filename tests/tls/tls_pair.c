/* Two tg_tls sessions talking through memory: see tls_pair.h. */
#include "tls_pair.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>

#include "common/buf.h"
#include "tracegate/error.h"

static mbedtls_entropy_context rng_entropy;
static mbedtls_ctr_drbg_context rng_drbg;
static pthread_once_t rng_once = PTHREAD_ONCE_INIT;
static int rng_seeded; /* 0 or the seeding's error */

static void rng_seed(void) {
  mbedtls_entropy_init(&rng_entropy);
  mbedtls_ctr_drbg_init(&rng_drbg);
  rng_seeded = mbedtls_ctr_drbg_seed(&rng_drbg, mbedtls_entropy_func,
                                     &rng_entropy, NULL, 0);
}

int tls_pair_rng(void *ctx, unsigned char *out, size_t len) {
  (void)ctx;
  pthread_once(&rng_once, rng_seed);
  if (rng_seeded) return rng_seeded;
  return mbedtls_ctr_drbg_random(&rng_drbg, out, len);
}

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

int tls_pair_open(tls_pair_t *p, const uint8_t *saved, size_t saved_len) {
  int rv = tg_tls_session_new(p->scfg, NULL, 0, &p->s);
  if (!rv) rv = tg_tls_session_new(p->ccfg, "relay.test", 0, &p->c);
  if (!rv && saved) rv = tg_tls_session_offer(p->c, saved, saved_len);
  return rv;
}

int tls_pair_close(tls_pair_t *p, uint8_t **save, size_t *save_len) {
  int rv = 0;
  if (save) {
    uint64_t expires = 0;
    *save = NULL;
    rv = p->c ? tg_tls_session_save(p->c, save, save_len, &expires) : -EINVAL;
  }
  tg_tls_session_free(p->s);
  tg_tls_session_free(p->c);
  p->s = p->c = NULL;
  return rv;
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

int tls_pair_once(tls_pair_t *p, const uint8_t *saved, size_t saved_len,
                  uint8_t **save, size_t *save_len) {
  int rv = tls_pair_open(p, saved, saved_len);
  if (!rv) rv = tls_pair_handshake(p);
  if (!rv && tg_tls_session_resumed(p->c) != (saved != NULL)) rv = -EPROTO;
  if (rv)
    fprintf(stderr, "tls_pair_once: %s: %s\n", tg_strerror(rv),
            p->c ? tg_tls_last_error(p->c) : "");
  int closed = tls_pair_close(p, rv ? NULL : save, save_len);
  return rv ? rv : closed;
}
