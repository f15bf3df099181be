/* Handing a session's record layer from mbedtls to tls/record.c. */
#include "tls/handoff.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/platform.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/ssl_ciphersuites.h>

#include "tracegate/error.h"

/* RFC 5246 7.2 alert descriptions we send or name. */
enum {
  ALERT_CLOSE_NOTIFY = 0,
  ALERT_UNEXPECTED_MESSAGE = 10,
  ALERT_BAD_RECORD_MAC = 20,
  ALERT_RECORD_OVERFLOW = 22,
  ALERT_DECODE_ERROR = 50,
};

void tg_tls_handoff_capture(tg_tls_handoff_t *h, const unsigned char *ms,
                            const unsigned char client_random[32],
                            const unsigned char server_random[32],
                            mbedtls_tls_prf_types prf) {
  memcpy(h->master, ms, sizeof(h->master));
  memcpy(h->randoms, server_random, 32);
  memcpy(h->randoms + 32, client_random, 32);
  h->prf = prf;
  h->have_secret = true;
}

static int cipher_of(const mbedtls_ssl_context *ssl, tg_rec_cipher_t *c) {
  const char *name = mbedtls_ssl_get_ciphersuite(ssl);
  const mbedtls_ssl_ciphersuite_t *cs =
      name ? mbedtls_ssl_ciphersuite_from_id(mbedtls_ssl_get_ciphersuite_id(name))
           : NULL;
  if (!cs) return -ENOTSUP;
  switch (cs->cipher) {
    case MBEDTLS_CIPHER_AES_128_GCM: *c = TG_REC_AES_128_GCM; return 0;
    case MBEDTLS_CIPHER_AES_256_GCM: *c = TG_REC_AES_256_GCM; return 0;
    case MBEDTLS_CIPHER_CHACHA20_POLY1305: *c = TG_REC_CHACHA20_POLY1305; return 0;
    default: return -ENOTSUP;
  }
}

static void wipe_secret(tg_tls_handoff_t *h) {
  mbedtls_platform_zeroize(h->master, sizeof(h->master));
  h->have_secret = false;
}

/* The records mbedtls would take at most, from the max_fragment_length a
 * peer negotiated (RFC 6066), capped at the protocol's 2^14. */
static size_t frag_limit(size_t mfl) {
  return mfl > 0 && mfl < TG_REC_PLAIN_MAX ? mfl : TG_REC_PLAIN_MAX;
}

int tg_tls_handoff_start(tg_tls_handoff_t *h, const mbedtls_ssl_context *ssl,
                         bool server) {
  tg_rec_cipher_t c;
  int rv = -ENOTSUP;
  const char *version = mbedtls_ssl_get_version(ssl);
  /* TLS 1.2 only, and nothing mbedtls read that it has not processed: it
   * reads exactly one record at a time from our memory BIO, so the next
   * byte of input belongs to us. (Output: our BIO takes every byte at
   * once, so mbedtls never holds any back.) */
  if (!h->have_secret || !version || strcmp(version, "TLSv1.2") != 0 ||
      mbedtls_ssl_check_pending(ssl) != 0 ||
      mbedtls_ssl_get_bytes_avail(ssl) != 0 || cipher_of(ssl, &c) != 0)
    goto out;
#if defined(MBEDTLS_SSL_MAX_FRAGMENT_LENGTH)
  h->out_max = frag_limit(mbedtls_ssl_get_output_max_frag_len(ssl));
  h->in_max = frag_limit(mbedtls_ssl_get_input_max_frag_len(ssl));
#else
  h->out_max = h->in_max = TG_REC_PLAIN_MAX;
#endif
  size_t kl = tg_rec_key_len(c), il = tg_rec_iv_len(c);
  /* key block = client key, server key, client IV, server IV (no MAC keys
   * for AEAD suites). */
  uint8_t kb[2 * 32 + 2 * 12];
  size_t kb_len = 2 * kl + 2 * il;
  if (mbedtls_ssl_tls_prf(h->prf, h->master, sizeof(h->master),
                          "key expansion", h->randoms, sizeof(h->randoms), kb,
                          kb_len) != 0)
    goto out;
  const uint8_t *ckey = kb, *skey = kb + kl, *civ = kb + 2 * kl,
                *siv = kb + 2 * kl + il;
  /* Each direction's sequence number starts at 0 with the keys of the
   * handshake's ChangeCipherSpec, and Finished is the one record sent
   * under them (RFC 5246 6.1, 7.4.9); renegotiation is off. So the first
   * application record is number 1 both ways. */
  rv = tg_rec_dir_init(&h->out, c, true, server ? skey : ckey, kl,
                       server ? siv : civ, il, 1);
  if (rv == 0) {
    rv = tg_rec_dir_init(&h->in, c, false, server ? ckey : skey, kl,
                         server ? civ : siv, il, 1);
    if (rv) tg_rec_dir_free(&h->out);
  }
  mbedtls_platform_zeroize(kb, sizeof(kb));
  if (rv == -EINVAL) rv = -ENOTSUP;
  if (rv == 0) h->started = true;
out:
  wipe_secret(h);
  return rv;
}

int tg_tls_handoff_alert(tg_tls_handoff_t *h, tg_buf_t *out, uint8_t level,
                         uint8_t desc) {
  const uint8_t body[2] = {level, desc};
  size_t n = tg_rec_sealed_size(h->out.cipher, sizeof(body));
  uint8_t *p = tg_buf_reserve(out, n);
  if (!p) return -ENOMEM;
  int rv = tg_rec_seal(&h->out, TG_REC_ALERT, body, sizeof(body), p);
  if (rv == 0) tg_buf_commit(out, n);
  return rv;
}

int tg_tls_handoff_write(tg_tls_handoff_t *h, tg_buf_t *out,
                         const uint8_t *data, size_t len) {
  if (len == 0) return 0;
  size_t max = h->out_max;
  size_t records = (len + max - 1) / max;
  size_t per = tg_rec_sealed_size(h->out.cipher, 0);
  if (records > (SIZE_MAX - len) / per) return -ENOBUFS;
  size_t total = len + records * per;
  uint8_t *p = tg_buf_reserve(out, total);
  if (!p) return -ENOMEM;
  /* Sealed straight into the output: no copy of the plaintext. */
  while (len > 0) {
    size_t k = len < max ? len : max;
    int rv = tg_rec_seal(&h->out, TG_REC_APPLICATION_DATA, data, k, p);
    if (rv) return rv; /* nothing committed; the direction is dead */
    p += tg_rec_sealed_size(h->out.cipher, k);
    data += k;
    len -= k;
  }
  tg_buf_commit(out, total);
  return 0;
}

/* A fatal error in what the peer sent: say why, tell the peer. */
static int refuse(tg_tls_handoff_t *h, tg_buf_t *out, uint8_t desc, char *why,
                  size_t whylen, const char *text) {
  snprintf(why, whylen, "%s", text);
  (void)tg_tls_handoff_alert(h, out, 2, desc);
  return TG_ETLS;
}

static size_t take_pending(tg_tls_handoff_t *h, uint8_t *buf, size_t cap) {
  size_t k = h->pend_len < cap ? h->pend_len : cap;
  memcpy(buf, h->pend + h->pend_off, k);
  h->pend_off += k;
  h->pend_len -= k;
  return k;
}

/* What a peer may send in a row that carries nothing, as mbedtls and
 * OpenSSL bound it on their record layers: empty application records
 * (legal, but a way to keep a reader busy for free) and warning alerts. */
#define MAX_EMPTY_RECORDS 3
#define MAX_WARNING_ALERTS 5

int tg_tls_handoff_read(tg_tls_handoff_t *h, tg_buf_t *in, tg_buf_t *out,
                        uint8_t *buf, size_t cap, size_t *n, char *why,
                        size_t whylen) {
  *n = 0;
  if (cap == 0) return -EINVAL;
  if (h->pend_len > 0) {
    *n = take_pending(h, buf, cap);
    return 0;
  }
  for (;;) {
    size_t have = tg_buf_size(in), size = 0;
    if (have == 0) return -EAGAIN; /* (a buffer never filled has no data) */
    const uint8_t *rec_untrusted = tg_buf_begin(in);
    if (tg_rec_peek(rec_untrusted, have, &size) != 0)
      return refuse(h, out, ALERT_RECORD_OVERFLOW, why, whylen,
                    "record header is not TLS 1.2 or its length is over the limit");
    if (size == 0) return -EAGAIN;
    /* Decided on the header alone, before waiting for the rest. */
    if (size < tg_rec_sealed_size(h->in.cipher, 0))
      return refuse(h, out, ALERT_DECODE_ERROR, why, whylen,
                    "record too short for its cipher");
    /* Over 2^14 bytes of plaintext (a ChaCha20 record has no explicit
     * nonce, so its fragment limit leaves room for more), or over the
     * max_fragment_length this session negotiated. */
    size_t plain = size - tg_rec_sealed_size(h->in.cipher, 0);
    if (plain > h->in_max) {
      char text[96];
      snprintf(text, sizeof(text),
               "record of %zu bytes of plaintext, over the limit of %zu",
               plain, h->in_max);
      return refuse(h, out, ALERT_RECORD_OVERFLOW, why, whylen, text);
    }
    if (size > have) return -EAGAIN;
    uint8_t *dst = buf;
    if (plain > cap) {
      if (!h->pend && !(h->pend = malloc(TG_REC_PLAIN_MAX))) return -ENOMEM;
      dst = h->pend;
    }
    uint8_t type = 0;
    if (tg_rec_open(&h->in, rec_untrusted, size, dst, &type) != 0)
      return refuse(h, out, ALERT_BAD_RECORD_MAC, why, whylen,
                    "record does not authenticate (bad_record_mac)");
    tg_buf_consume(in, size);
    if (type == TG_REC_APPLICATION_DATA) {
      if (plain == 0) {
        if (++h->empty_run > MAX_EMPTY_RECORDS)
          return refuse(h, out, ALERT_UNEXPECTED_MESSAGE, why, whylen,
                        "more than 3 empty records in a row");
        continue;
      }
      h->empty_run = h->warning_run = 0;
      if (dst == buf) {
        *n = plain;
      } else {
        h->pend_off = 0;
        h->pend_len = plain;
        *n = take_pending(h, buf, cap);
      }
      return 0;
    }
    if (type == TG_REC_ALERT) {
      if (plain != 2)
        return refuse(h, out, ALERT_DECODE_ERROR, why, whylen,
                      "alert record is not 2 bytes");
      if (dst[1] == ALERT_CLOSE_NOTIFY) {
        snprintf(why, whylen, "peer sent close_notify");
        return TG_EPEER_CLOSED;
      }
      /* Warnings carry nothing we act on (mbedtls skips them too), but
       * not without end. */
      if (dst[0] == 1) {
        if (++h->warning_run > MAX_WARNING_ALERTS)
          return refuse(h, out, ALERT_UNEXPECTED_MESSAGE, why, whylen,
                        "more than 5 warning alerts in a row");
        continue;
      }
      snprintf(why, whylen, "peer sent fatal alert %u", dst[1]);
      return TG_ETLS_PEER_ALERT;
    }
    /* A HelloRequest (renegotiation, disabled on our side) or anything
     * else has no place after the handshake. */
    char text[96];
    snprintf(text, sizeof(text), "unexpected record type %u after the handshake",
             type);
    return refuse(h, out, ALERT_UNEXPECTED_MESSAGE, why, whylen, text);
  }
}

void tg_tls_handoff_clear(tg_tls_handoff_t *h) {
  if (h->started) {
    tg_rec_dir_free(&h->out);
    tg_rec_dir_free(&h->in);
  }
  if (h->pend) {
    mbedtls_platform_zeroize(h->pend, TG_REC_PLAIN_MAX);
    free(h->pend);
  }
  mbedtls_platform_zeroize(h, sizeof(*h));
}
