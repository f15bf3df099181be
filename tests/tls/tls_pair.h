/* Two tg_tls sessions talking through memory, no socket: the tls tests'
 * and benches' harness. Certificates come from tg_test_certs() in |dir|/pki:
 * the server is relay.test, the client alice, both under |dir|/pki/ca.pem. */
#ifndef TRACEGATE_TESTS_TLS_PAIR_H
#define TRACEGATE_TESTS_TLS_PAIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tls/session.h"

typedef struct tls_pair {
  tg_tls_config_t *scfg, *ccfg;
  tg_tls_session_t *s, *c;
  /* Thread CPU time spent in each side's tg_tls_handshake(), added up by
   * tls_pair_handshake() (for benches). */
  uint64_t s_cpu_ns, c_cpu_ns;
} tls_pair_t;

/* A config for that side with |o|'s other fields; the files (ca_file if
 * not given), server and (for a server) a one-hour ticket lifetime are
 * filled in. NULL, with the reason on stderr, if it is refused. The
 * caller frees it. */
tg_tls_config_t *tls_pair_config(const char *dir, bool server, tg_tls_opts_t o);

/* An mbedtls random source (f_rng; |ctx| unused) for tests that make
 * keys: a CTR_DRBG seeded from the system's entropy on first use, for the
 * process's life. 0, or mbedtls's error if seeding or drawing fails. */
int tls_pair_rng(void *ctx, unsigned char *out, size_t len);

/* Opens both sessions on |p|'s configs (the client's for relay.test),
 * the client offering |saved| if given: 0 or the first error. */
int tls_pair_open(tls_pair_t *p, const uint8_t *saved, size_t saved_len);

/* Saves the client's session into *save (the caller frees it) when |save|
 * is given, then frees both sessions (not the configs): 0 or the save's
 * error. */
int tls_pair_close(tls_pair_t *p, uint8_t **save, size_t *save_len);

/* Moves what |from| wrote into |to|'s input: 0 or tg_tls_feed()'s error. */
int tls_pair_carry(tg_tls_session_t *from, tg_tls_session_t *to);

/* Runs both handshakes until both end: 0 when both succeeded, else the
 * first failure (-ETIMEDOUT if they never end). */
int tls_pair_handshake(tls_pair_t *p);

/* One whole handshake on |p|'s configs, the client offering |saved| if
 * given: opens, runs it, checks that it resumed exactly when |saved| was
 * offered, and closes, the client's session saved into *save when |save|
 * is given (the caller frees it). p->s_cpu_ns and p->c_cpu_ns add its
 * CPU. 0, or the first failure (-EPROTO: resumed when it should not have,
 * or not when it should), said on stderr. */
int tls_pair_once(tls_pair_t *p, const uint8_t *saved, size_t saved_len,
                  uint8_t **save, size_t *save_len);

#endif /* TRACEGATE_TESTS_TLS_PAIR_H */
