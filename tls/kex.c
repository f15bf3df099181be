/* x25519 key exchanges by libcrypto, both ends: see tls/kex.h.
 *
 * This file reads and writes mbedtls_ssl_handshake_params (ssl_internal.h)
 * and must never be used unless tls/paths.c found the mbedtls running to
 * be the version compiled against and tg_tls_kex_self_test() passed. */
#include "tls/kex.h"
#include "tls/kex_test.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/ssl_internal.h>
#include <openssl/err.h>
#include <openssl/evp.h>

/* The handshakes whose exchange lives elsewhere (PSA keys, restartable
 * ECC) or whose ECDH context has another layout are left to mbedtls. */
#if defined(MBEDTLS_ECDH_LEGACY_CONTEXT) && defined(MBEDTLS_ECDH_C) &&  \
    defined(MBEDTLS_ECP_DP_CURVE25519_ENABLED) &&                      \
    defined(MBEDTLS_SSL_CLI_C) && defined(MBEDTLS_SSL_SRV_C) &&        \
    defined(MBEDTLS_KEY_EXCHANGE_ECDHE_ECDSA_ENABLED) &&               \
    defined(MBEDTLS_GCM_C) && !defined(MBEDTLS_USE_PSA_CRYPTO) &&      \
    !defined(MBEDTLS_SSL_ECP_RESTARTABLE_ENABLED)
#define KEX_BUILT 1
#else
#define KEX_BUILT 0
#endif

#include "tls/self_test_key.h"

#define X25519_LEN 32
/* The message's handshake header, then the ECPoint: a length byte and
 * the public value (RFC 8422, 5.7). */
#define CKE_HEADER_LEN 4

static atomic_ulong n_steps, n_server_steps;

bool tg_tls_kex_built(void) { return KEX_BUILT; }

unsigned long tg_tls_kex_count(void) {
  return atomic_load_explicit(&n_steps, memory_order_relaxed);
}

unsigned long tg_tls_kex_server_count(void) {
  return atomic_load_explicit(&n_server_steps, memory_order_relaxed);
}

#if KEX_BUILT

_Static_assert(MBEDTLS_PREMASTER_SIZE >= X25519_LEN,
               "the premaster holds an x25519 secret");
_Static_assert(MBEDTLS_SSL_OUT_CONTENT_LEN >= CKE_HEADER_LEN + 1 + X25519_LEN,
               "the message fits the output buffer");

bool tg_tls_kex_applies(const mbedtls_ssl_context *ssl) {
  if (ssl->conf == NULL || ssl->conf->endpoint != MBEDTLS_SSL_IS_CLIENT ||
      ssl->state != MBEDTLS_SSL_CLIENT_KEY_EXCHANGE || ssl->handshake == NULL)
    return false;
  const mbedtls_ssl_ciphersuite_t *cs = ssl->handshake->ciphersuite_info;
  if (cs == NULL || (cs->key_exchange != MBEDTLS_KEY_EXCHANGE_ECDHE_ECDSA &&
                     cs->key_exchange != MBEDTLS_KEY_EXCHANGE_ECDHE_RSA))
    return false;
  return ssl->handshake->ecdh_ctx.grp.id == MBEDTLS_ECP_DP_CURVE25519;
}

/* The key pair and the shared secret with |peer|: 0, or an mbedtls
 * error code. */
static int x25519(const unsigned char peer[X25519_LEN],
                  unsigned char pub[X25519_LEN],
                  unsigned char secret[X25519_LEN]) {
  int ret = MBEDTLS_ERR_SSL_ALLOC_FAILED;
  EVP_PKEY *own = NULL, *theirs = NULL;
  EVP_PKEY_CTX *dctx = NULL;
  EVP_PKEY_CTX *kctx = EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, NULL);
  if (kctx == NULL || EVP_PKEY_keygen_init(kctx) <= 0 ||
      EVP_PKEY_keygen(kctx, &own) <= 0)
    goto fail;
  size_t len = X25519_LEN;
  if (EVP_PKEY_get_raw_public_key(own, pub, &len) <= 0 || len != X25519_LEN)
    goto fail;
  theirs = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, peer, X25519_LEN);
  dctx = EVP_PKEY_CTX_new(own, NULL);
  if (theirs == NULL || dctx == NULL || EVP_PKEY_derive_init(dctx) <= 0)
    goto fail;
  /* libcrypto refuses a peer value whose secret is all zeros (a point of
   * small order), as RFC 7748 asks and as mbedtls does. */
  ret = MBEDTLS_ERR_ECP_BAD_INPUT_DATA;
  len = X25519_LEN;
  if (EVP_PKEY_derive_set_peer(dctx, theirs) <= 0 ||
      EVP_PKEY_derive(dctx, secret, &len) <= 0 || len != X25519_LEN)
    goto fail;
  ret = 0;
fail:
  /* Nothing of a refused value is left for the thread's next libcrypto
   * user (the record layer, the signer) to take for its own error. */
  if (ret != 0) ERR_clear_error();
  EVP_PKEY_CTX_free(dctx);
  EVP_PKEY_free(theirs);
  EVP_PKEY_free(own); /* libcrypto wipes the private key */
  EVP_PKEY_CTX_free(kctx);
  return ret;
}

/* What mbedtls's own ClientKeyExchange step does for an ECDHE suite, with
 * the two multiplications made by x25519() above. */
int tg_tls_kex_client_step(mbedtls_ssl_context *ssl) {
  int ret = mbedtls_ssl_flush_output(ssl);
  if (ret != 0) return ret;
  mbedtls_ssl_handshake_params *hs = ssl->handshake;
  unsigned char peer[X25519_LEN], pub[X25519_LEN], secret[X25519_LEN];
  /* mbedtls read the server's value little-endian with bit 255 cleared
   * (RFC 7748, 5); written back the same way it is the value sent. */
  if (mbedtls_mpi_write_binary_le(&hs->ecdh_ctx.Qp.X, peer, sizeof(peer)) != 0)
    return MBEDTLS_ERR_SSL_BAD_HS_SERVER_KEY_EXCHANGE;
  ret = x25519(peer, pub, secret);
  if (ret == 0) {
    memcpy(hs->premaster, secret, sizeof(secret));
    hs->pmslen = sizeof(secret);
    ssl->out_msg[CKE_HEADER_LEN] = X25519_LEN;
    memcpy(ssl->out_msg + CKE_HEADER_LEN + 1, pub, sizeof(pub));
    ssl->out_msglen = CKE_HEADER_LEN + 1 + X25519_LEN;
    ssl->out_msgtype = MBEDTLS_SSL_MSG_HANDSHAKE;
    ssl->out_msg[0] = MBEDTLS_SSL_HS_CLIENT_KEY_EXCHANGE;
    ssl->state++;
    ret = mbedtls_ssl_write_handshake_msg(ssl);
    if (ret == 0) atomic_fetch_add_explicit(&n_steps, 1, memory_order_relaxed);
  }
  mbedtls_platform_zeroize(secret, sizeof(secret));
  return ret;
}

/* --- the server's side ------------------------------------------------------ */

/* RFC 8422 5.1.1 / RFC 8446 4.2.7: x25519's NamedCurve. */
#define TLS_ID_X25519 29
/* ServerKeyExchange: the handshake header, ECParameters (curve type and
 * NamedCurve), the ECPoint (length and value), then the signature. */
#define SKE_PARAMS_LEN (1 + 2 + 1 + X25519_LEN)

_Static_assert(MBEDTLS_SSL_OUT_CONTENT_LEN >=
                   CKE_HEADER_LEN + SKE_PARAMS_LEN + 2 + 2 +
                       MBEDTLS_PK_SIGNATURE_MAX_SIZE,
               "the ServerKeyExchange fits the output buffer");

/* The group mbedtls's server would take: its own preference list against
 * the client's supported groups, first match (as ssl_srv.c picks it). */
static bool server_picks_x25519(const mbedtls_ssl_context *ssl) {
  const mbedtls_ecp_curve_info **offered = ssl->handshake->curves;
  const mbedtls_ecp_group_id *ours = ssl->conf->curve_list;
  if (offered == NULL || ours == NULL) return false;
  for (; *ours != MBEDTLS_ECP_DP_NONE; ours++)
    for (const mbedtls_ecp_curve_info **c = offered; *c != NULL; c++)
      if ((*c)->grp_id == *ours) return *ours == MBEDTLS_ECP_DP_CURVE25519;
  return false;
}

bool tg_tls_kex_server_applies(const mbedtls_ssl_context *ssl) {
  if (ssl->conf == NULL || ssl->conf->endpoint != MBEDTLS_SSL_IS_SERVER ||
      ssl->state != MBEDTLS_SSL_SERVER_KEY_EXCHANGE || ssl->handshake == NULL ||
      ssl->minor_ver != MBEDTLS_SSL_MINOR_VERSION_3)
    return false;
#if defined(MBEDTLS_SSL_ASYNC_PRIVATE)
  if (ssl->conf->f_async_sign_start != NULL) return false;
#endif
  const mbedtls_ssl_ciphersuite_t *cs = ssl->handshake->ciphersuite_info;
  if (cs == NULL || cs->key_exchange != MBEDTLS_KEY_EXCHANGE_ECDHE_ECDSA)
    return false;
  return server_picks_x25519(ssl);
}

/* Signs the parameters |params| (|n| bytes) written in the message as
 * mbedtls's server does (TLS 1.2: the hash the client's
 * signature_algorithms allow for the suite's key type, over both randoms
 * and the parameters) and appends the DigitallySigned at |*len|. */
static int sign_params(mbedtls_ssl_context *ssl, const unsigned char *params,
                       size_t n, size_t *len) {
  mbedtls_pk_type_t sig_alg = mbedtls_ssl_get_ciphersuite_sig_pk_alg(
      ssl->handshake->ciphersuite_info);
  mbedtls_md_type_t md_alg =
      sig_alg == MBEDTLS_PK_NONE
          ? MBEDTLS_MD_NONE
          : mbedtls_ssl_sig_hash_set_find(&ssl->handshake->hash_algs, sig_alg);
  if (md_alg == MBEDTLS_MD_NONE) return MBEDTLS_ERR_SSL_INTERNAL_ERROR;
  unsigned char hash[MBEDTLS_MD_MAX_SIZE];
  size_t hashlen = 0;
  int ret = mbedtls_ssl_get_key_exchange_md_tls1_2(
      ssl, hash, &hashlen, (unsigned char *)params, n, md_alg);
  if (ret != 0) return ret;
  mbedtls_pk_context *key = mbedtls_ssl_own_key(ssl);
  if (key == NULL) return MBEDTLS_ERR_SSL_PRIVATE_KEY_REQUIRED;
  unsigned char *out = ssl->out_msg + *len;
  out[0] = mbedtls_ssl_hash_from_md_alg(md_alg);
  out[1] = mbedtls_ssl_sig_from_pk_alg(sig_alg);
  size_t siglen = 0;
  ret = mbedtls_pk_sign(key, md_alg, hash, hashlen, out + 4, &siglen,
                        ssl->conf->f_rng, ssl->conf->p_rng);
  if (ret != 0) return ret;
  out[2] = (unsigned char)(siglen >> 8);
  out[3] = (unsigned char)siglen;
  *len += 4 + siglen;
  return 0;
}

int tg_tls_kex_server_params(mbedtls_ssl_context *ssl, void **key) {
  *key = NULL;
  int ret = mbedtls_ssl_flush_output(ssl);
  if (ret != 0) return ret;
  ret = MBEDTLS_ERR_SSL_ALLOC_FAILED;
  EVP_PKEY *own = NULL;
  EVP_PKEY_CTX *kctx = EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, NULL);
  unsigned char *params = ssl->out_msg + CKE_HEADER_LEN;
  size_t plen = X25519_LEN;
  if (kctx == NULL || EVP_PKEY_keygen_init(kctx) <= 0 ||
      EVP_PKEY_keygen(kctx, &own) <= 0 ||
      EVP_PKEY_get_raw_public_key(own, params + 4, &plen) <= 0 ||
      plen != X25519_LEN)
    goto fail;
  params[0] = MBEDTLS_ECP_TLS_NAMED_CURVE;
  params[1] = 0;
  params[2] = TLS_ID_X25519;
  params[3] = X25519_LEN;
  size_t len = CKE_HEADER_LEN + SKE_PARAMS_LEN;
  if ((ret = sign_params(ssl, params, SKE_PARAMS_LEN, &len)) != 0) goto fail;
  ssl->out_msglen = len;
  ssl->out_msgtype = MBEDTLS_SSL_MSG_HANDSHAKE;
  ssl->out_msg[0] = MBEDTLS_SSL_HS_SERVER_KEY_EXCHANGE;
  ssl->state++;
  ret = mbedtls_ssl_write_handshake_msg(ssl);
  /* Written, or queued for the next step's flush, as mbedtls's own. */
  if (ret == 0 || ret == MBEDTLS_ERR_SSL_WANT_WRITE) {
    *key = own;
    own = NULL;
  }
fail:
  if (ret != 0 && ret != MBEDTLS_ERR_SSL_WANT_WRITE) ERR_clear_error();
  EVP_PKEY_free(own);
  EVP_PKEY_CTX_free(kctx);
  return ret;
}

/* The shared secret of |own| with the peer's value |peer|: 0, or an
 * mbedtls error code. */
static int x25519_derive(EVP_PKEY *own, const unsigned char peer[X25519_LEN],
                         unsigned char secret[X25519_LEN]) {
  int ret = MBEDTLS_ERR_SSL_BAD_HS_CLIENT_KEY_EXCHANGE_CS;
  EVP_PKEY *theirs =
      EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, peer, X25519_LEN);
  EVP_PKEY_CTX *dctx = theirs ? EVP_PKEY_CTX_new(own, NULL) : NULL;
  size_t len = X25519_LEN;
  /* An all-zero secret (a point of small order) is refused, as above. */
  if (dctx != NULL && EVP_PKEY_derive_init(dctx) > 0 &&
      EVP_PKEY_derive_set_peer(dctx, theirs) > 0 &&
      EVP_PKEY_derive(dctx, secret, &len) > 0 && len == X25519_LEN)
    ret = 0;
  if (ret != 0) ERR_clear_error();
  EVP_PKEY_CTX_free(dctx);
  EVP_PKEY_free(theirs);
  return ret;
}

int tg_tls_kex_server_finish(mbedtls_ssl_context *ssl, void **key) {
  int ret = mbedtls_ssl_flush_output(ssl);
  if (ret != 0) return ret;
  if ((ret = mbedtls_ssl_read_record(ssl, 1)) != 0) return ret;
  if (ssl->in_msgtype != MBEDTLS_SSL_MSG_HANDSHAKE)
    return MBEDTLS_ERR_SSL_UNEXPECTED_MESSAGE;
  if (ssl->in_msg[0] != MBEDTLS_SSL_HS_CLIENT_KEY_EXCHANGE)
    return MBEDTLS_ERR_SSL_BAD_HS_CLIENT_KEY_EXCHANGE;
  /* The ECPoint alone: a length byte and the client's value. */
  const unsigned char *p = ssl->in_msg + mbedtls_ssl_hs_hdr_len(ssl);
  if (ssl->in_hslen != mbedtls_ssl_hs_hdr_len(ssl) + 1 + X25519_LEN ||
      p[0] != X25519_LEN)
    return MBEDTLS_ERR_SSL_BAD_HS_CLIENT_KEY_EXCHANGE_RP;
  unsigned char secret[X25519_LEN];
  ret = x25519_derive(*key, p + 1, secret);
  tg_tls_kex_server_abandon(key);
  if (ret != 0) return ret;
  mbedtls_ssl_handshake_params *hs = ssl->handshake;
  memcpy(hs->premaster, secret, sizeof(secret));
  hs->pmslen = sizeof(secret);
  mbedtls_platform_zeroize(secret, sizeof(secret));
  if ((ret = mbedtls_ssl_derive_keys(ssl)) != 0) return ret;
  ssl->state++;
  atomic_fetch_add_explicit(&n_server_steps, 1, memory_order_relaxed);
  return 0;
}

void tg_tls_kex_server_abandon(void **key) {
  EVP_PKEY_free(*key); /* libcrypto wipes the private key */
  *key = NULL;
}

/* --- the self-test -------------------------------------------------------- */

/* One direction of the in-memory link, and one end's pair of them. */
typedef struct pipe {
  unsigned char b[8192];
  size_t n;
} pipe_t;

typedef struct end {
  pipe_t *in, *out;
} end_t;

static int end_send(void *ctx, const unsigned char *buf, size_t len) {
  pipe_t *p = ((end_t *)ctx)->out;
  if (len > sizeof(p->b) - p->n) len = sizeof(p->b) - p->n;
  if (len == 0) return MBEDTLS_ERR_SSL_WANT_WRITE;
  memcpy(p->b + p->n, buf, len);
  p->n += len;
  return (int)len;
}

static int end_recv(void *ctx, unsigned char *buf, size_t len) {
  pipe_t *p = ((end_t *)ctx)->in;
  if (p->n == 0) return MBEDTLS_ERR_SSL_WANT_READ;
  if (len > p->n) len = p->n;
  memcpy(buf, p->b, len);
  memmove(p->b, p->b + len, p->n - len);
  p->n -= len;
  return (int)len;
}

/* Steps |ssl| until it waits for input, fails or is done: 0 while it
 * waits or when it is done, else the error. With |ours|, the end takes
 * the key exchange here when it applies, as tls/session.c does; |*key| is
 * a server's between its two steps. */
static int run_until_blocked(mbedtls_ssl_context *ssl, bool ours,
                             bool *kex_taken, void **key) {
  while (ssl->state != MBEDTLS_SSL_HANDSHAKE_OVER) {
    int ret;
    if (ours && tg_tls_kex_applies(ssl)) {
      ret = tg_tls_kex_client_step(ssl);
      *kex_taken = true;
    } else if (ours && tg_tls_kex_server_applies(ssl)) {
      ret = tg_tls_kex_server_params(ssl, key);
    } else if (*key != NULL && ssl->state == MBEDTLS_SSL_CLIENT_KEY_EXCHANGE) {
      ret = tg_tls_kex_server_finish(ssl, key);
      if (ret == 0) *kex_taken = true;
    } else {
      ret = mbedtls_ssl_handshake_step(ssl);
    }
    if (ret == MBEDTLS_ERR_SSL_WANT_READ) return 0;
    if (ret != 0) return ret;
  }
  return 0;
}

typedef struct self_test {
  mbedtls_entropy_context entropy;
  mbedtls_ctr_drbg_context drbg;
  mbedtls_x509_crt cert;
  mbedtls_pk_context key;
  mbedtls_ssl_config ccfg, scfg;
  mbedtls_ssl_context client, server;
  pipe_t to_server, to_client;
  end_t client_end, server_end;
  void *server_key;
} self_test_t;

static const int kSuites[] = {MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                              0};
/* x25519 for the exchange, the server's choice; P-256 because mbedtls
 * serves an ECDSA certificate only on a curve the client offers. */
static const mbedtls_ecp_group_id kGroups[] = {
    MBEDTLS_ECP_DP_CURVE25519, MBEDTLS_ECP_DP_SECP256R1, MBEDTLS_ECP_DP_NONE};

static int config(self_test_t *t, mbedtls_ssl_config *c, int endpoint) {
  int ret = mbedtls_ssl_config_defaults(c, endpoint, MBEDTLS_SSL_TRANSPORT_STREAM,
                                        MBEDTLS_SSL_PRESET_DEFAULT);
  if (ret != 0) return ret;
  mbedtls_ssl_conf_rng(c, mbedtls_ctr_drbg_random, &t->drbg);
  mbedtls_ssl_conf_min_version(c, MBEDTLS_SSL_MAJOR_VERSION_3,
                               MBEDTLS_SSL_MINOR_VERSION_3);
  mbedtls_ssl_conf_ciphersuites(c, kSuites);
  mbedtls_ssl_conf_curves(c, kGroups);
  mbedtls_ssl_conf_authmode(c, MBEDTLS_SSL_VERIFY_NONE);
  return 0;
}

/* One handshake in memory, the client's exchange by this module
 * (|client_ours|) or else the server's. */
static const char *self_test_run(self_test_t *t, bool client_ours) {
  static const char seed[] = "tracegate kex self-test";
  if (mbedtls_ctr_drbg_seed(&t->drbg, mbedtls_entropy_func, &t->entropy,
                            (const unsigned char *)seed, sizeof(seed) - 1) != 0)
    return "no random numbers";
  /* A key and certificate of this run's (tls/self_test_key.h). */
  if (tg_tls_self_test_key(&t->key, &t->cert, &t->drbg) != 0)
    return "mbedtls does not make the test's key and certificate";
  if (config(t, &t->ccfg, MBEDTLS_SSL_IS_CLIENT) != 0 ||
      config(t, &t->scfg, MBEDTLS_SSL_IS_SERVER) != 0 ||
      mbedtls_ssl_conf_own_cert(&t->scfg, &t->cert, &t->key) != 0 ||
      mbedtls_ssl_setup(&t->client, &t->ccfg) != 0 ||
      mbedtls_ssl_setup(&t->server, &t->scfg) != 0)
    return "mbedtls refuses the test's configuration";
  t->client_end = (end_t){.in = &t->to_client, .out = &t->to_server};
  t->server_end = (end_t){.in = &t->to_server, .out = &t->to_client};
  mbedtls_ssl_set_bio(&t->client, &t->client_end, end_send, end_recv, NULL);
  mbedtls_ssl_set_bio(&t->server, &t->server_end, end_send, end_recv, NULL);
  bool ctaken = false, staken = false;
  void *no_key = NULL;
  /* A full handshake is four flights; a few more rounds tolerate none. */
  for (int round = 0; round < 16; round++) {
    if (run_until_blocked(&t->client, client_ours, &ctaken, &no_key) != 0)
      return client_ours ? "the client's handshake failed"
                         : "mbedtls's client refused the server's key "
                           "exchange or Finished";
    if (run_until_blocked(&t->server, !client_ours, &staken, &t->server_key) !=
        0)
      return client_ours ? "mbedtls's server refused the client's key "
                           "exchange or Finished"
                         : "the server's handshake failed";
    if (t->client.state == MBEDTLS_SSL_HANDSHAKE_OVER &&
        t->server.state == MBEDTLS_SSL_HANDSHAKE_OVER)
      return (client_ours ? ctaken : staken)
                 ? NULL
                 : "the handshake never reached the key exchange";
  }
  return "the handshake did not finish";
}

static const char *self_test_one(bool client_ours) {
  self_test_t *t = calloc(1, sizeof(*t));
  if (t == NULL) return "no memory";
  mbedtls_entropy_init(&t->entropy);
  mbedtls_ctr_drbg_init(&t->drbg);
  mbedtls_x509_crt_init(&t->cert);
  mbedtls_pk_init(&t->key);
  mbedtls_ssl_config_init(&t->ccfg);
  mbedtls_ssl_config_init(&t->scfg);
  mbedtls_ssl_init(&t->client);
  mbedtls_ssl_init(&t->server);
  const char *why = self_test_run(t, client_ours);
  tg_tls_kex_server_abandon(&t->server_key);
  mbedtls_ssl_free(&t->client);
  mbedtls_ssl_free(&t->server);
  mbedtls_ssl_config_free(&t->ccfg);
  mbedtls_ssl_config_free(&t->scfg);
  mbedtls_pk_free(&t->key);
  mbedtls_x509_crt_free(&t->cert);
  mbedtls_ctr_drbg_free(&t->drbg);
  mbedtls_entropy_free(&t->entropy);
  free(t);
  return why;
}

/* Each side against mbedtls's own other side: both ends' Finished hold
 * only if both derived the same keys, and mbedtls's client checks the
 * server's signature over its parameters. */
const char *tg_tls_kex_self_test(void) {
  const char *why = self_test_one(true);
  return why ? why : self_test_one(false);
}

#else /* !KEX_BUILT */

bool tg_tls_kex_applies(const mbedtls_ssl_context *ssl) {
  (void)ssl;
  return false;
}

int tg_tls_kex_client_step(mbedtls_ssl_context *ssl) {
  (void)ssl;
  return MBEDTLS_ERR_SSL_FEATURE_UNAVAILABLE;
}

bool tg_tls_kex_server_applies(const mbedtls_ssl_context *ssl) {
  (void)ssl;
  return false;
}

int tg_tls_kex_server_params(mbedtls_ssl_context *ssl, void **key) {
  (void)ssl;
  *key = NULL;
  return MBEDTLS_ERR_SSL_FEATURE_UNAVAILABLE;
}

int tg_tls_kex_server_finish(mbedtls_ssl_context *ssl, void **key) {
  (void)ssl;
  (void)key;
  return MBEDTLS_ERR_SSL_FEATURE_UNAVAILABLE;
}

void tg_tls_kex_server_abandon(void **key) { *key = NULL; }

const char *tg_tls_kex_self_test(void) {
  return "this mbedtls keeps its key exchange where the step cannot reach";
}

#endif /* KEX_BUILT */
