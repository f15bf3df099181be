/* tls/handoff.h: takes the record layer of a TLS 1.2 session over from
 * mbedtls once its handshake is done, and carries the application data
 * with tls/record.c (libcrypto), as kTLS takes it over in a kernel.
 *
 * Through mbedtls's documented interfaces only: its key export callback
 * (MBEDTLS_SSL_EXPORT_KEYS) gives the master secret, from which
 * tg_tls_handoff_start() derives the key block (RFC 5246 6.3); the
 * sequence numbers follow from the protocol; the suite, the version, the
 * negotiated max_fragment_length and whether mbedtls holds unread input
 * come from ssl.h's getters. From then on mbedtls sees no record of this
 * session (tls/session.c frees its context): every read, write and alert
 * goes through here, with the limits mbedtls and OpenSSL keep on their
 * own record layers. Only tls/session.c uses it. */
#ifndef TRACEGATE_TLS_HANDOFF_H
#define TRACEGATE_TLS_HANDOFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mbedtls/ssl.h>

#include "common/buf.h"
#include "tls/record.h"

typedef struct tg_tls_handoff {
  /* Captured during the handshake (the export callback). */
  bool have_secret;
  uint8_t master[48];
  uint8_t randoms[64]; /* server_random || client_random: the PRF's seed */
  mbedtls_tls_prf_types prf;
  /* After tg_tls_handoff_start(). */
  bool started;
  tg_rec_dir_t out, in;
  /* Plaintext per record: what the peer negotiated (RFC 6066), or 2^14. */
  size_t out_max, in_max;
  /* Empty application records and warning alerts received in a row. */
  unsigned empty_run, warning_run;
  /* Plaintext of a record the reader had no room for. */
  uint8_t *pend; /* TG_REC_PLAIN_MAX bytes, allocated on first need */
  size_t pend_off, pend_len;
} tg_tls_handoff_t;

/* The export callback's part: keeps a copy of the master secret and the
 * randoms of the handshake under way (a resumed one included). */
void tg_tls_handoff_capture(tg_tls_handoff_t *h, const unsigned char *ms,
                            const unsigned char client_random[32],
                            const unsigned char server_random[32],
                            mbedtls_tls_prf_types prf);

/* At the end of a successful handshake of |ssl| (server or client side):
 * keys both directions. Returns 0, after which |ssl| carries no more
 * records and may be freed; -ENOTSUP when this session cannot be handed
 * over (not TLS 1.2, a cipher libcrypto lacks, no secret captured, or
 * mbedtls holds unread input): mbedtls then keeps the record layer;
 * -ENOMEM. The captured secret is wiped either way. */
int tg_tls_handoff_start(tg_tls_handoff_t *h, const mbedtls_ssl_context *ssl,
                         bool server);

/* Opens records from |in| (ciphertext, consumed as records are opened)
 * into |buf| (|cap| > 0 bytes): *n bytes of application data, 0 when
 * none is complete yet (-EAGAIN). Errors: TG_EPEER_CLOSED (close_notify),
 * TG_ETLS_PEER_ALERT, TG_ETLS (a record that does not authenticate or
 * parse, is over the negotiated size (record_overflow), or the fourth
 * empty record or sixth warning alert in a row (unexpected_message); the
 * fatal alert for the peer is then appended to |out|), -ENOMEM.
 * |why| (|whylen| bytes) says what was wrong. */
int tg_tls_handoff_read(tg_tls_handoff_t *h, tg_buf_t *in, tg_buf_t *out,
                        uint8_t *buf, size_t cap, size_t *n, char *why,
                        size_t whylen);

/* Seals |len| bytes as application data records of up to
 * TG_REC_PLAIN_MAX bytes, appended to |out|. Returns 0, -ENOMEM (no
 * memory, or |out|'s cap), TG_ETLS. */
int tg_tls_handoff_write(tg_tls_handoff_t *h, tg_buf_t *out,
                         const uint8_t *data, size_t len);

/* Appends an alert record (RFC 5246 7.2): level 1 warning, 2 fatal.
 * Returns 0, -ENOMEM (as tg_tls_handoff_write), TG_ETLS. */
int tg_tls_handoff_alert(tg_tls_handoff_t *h, tg_buf_t *out, uint8_t level,
                         uint8_t desc);

/* Wipes and frees what |h| holds (not |h| itself). */
void tg_tls_handoff_clear(tg_tls_handoff_t *h);

#endif /* TRACEGATE_TLS_HANDOFF_H */
