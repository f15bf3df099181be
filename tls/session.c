/* mbedtls configuration, memory-buffer sessions, error translation. */
#include "tls/session.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecp.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/sha256.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_ticket.h>
#include <mbedtls/x509_crl.h>
#include <mbedtls/x509_crt.h>

#include "tls/paths.h"
#if TG_TLS_LIBCRYPTO
#include "tls/ecdsa.h"
#include "tls/handoff.h"
#include "tls/kex.h"
#endif
#include "tracegate/error.h"
#include "auth/cert_identity.h"
#include "auth/crl.h"
#include "common/identity.h"
#include "common/log.h"
#include "common/notice.h"

#define DEFAULT_IN_MAX (1024u * 1024)

#if TG_TLS_LIBCRYPTO
_Static_assert(TG_TLS_RECORD_PLAIN_MAX == TG_REC_PLAIN_MAX,
               "one record limit for the session and its records");
#endif
/* A client keeps a ticket no longer than this, whatever the server's hint
 * says (a hint of 0 means "not said": then the default lifetime). */
#define CLIENT_TICKET_MAX_S (24u * 3600)
/* Serialised sessions are a few hundred bytes plus the peer's certificate
 * and the ticket: anything larger is not one of ours. */
#define SAVED_SESSION_MAX (16u * 1024)

struct tg_tls_config {
  bool server;
  tg_tls_client_auth_t client_auth;
  mbedtls_ssl_config conf;
  mbedtls_entropy_context entropy;
  mbedtls_ctr_drbg_context drbg;
  mbedtls_x509_crt ca;
  mbedtls_x509_crt own_cert;
  mbedtls_pk_context own_key;
  mbedtls_x509_crl *crl; /* NULL when none; swapped by reload */
  char *crl_file;        /* for reloads without a path */
  int suites[8];         /* 0-terminated; conf points here */
  mbedtls_ecp_group_id groups[32]; /* NONE-terminated; conf points here */
  /* Server: session tickets (RFC 5077), keys in memory only. */
  bool tickets;
  mbedtls_ssl_ticket_context ticket;
  /* Hand each session's records to tls/record.c after its handshake. */
  bool handoff;
  /* The handshake's ECDSA by libcrypto (tls/ecdsa.h): the own key and the
   * CA keys are adopted at load time, the peer's in note_verify. */
  bool libcrypto_signatures;
  /* Either end: its x25519 key exchange by libcrypto (tls/kex.h). */
  bool libcrypto_kex;
};

/* The session inside mbedtls_ssl_handshake() on this thread, for the
 * callbacks mbedtls runs there (ticket parsing, key export), which get only
 * the config: sessions of one config may shake hands on several threads
 * at once. */
static _Thread_local tg_tls_session_t *tl_handshaking;

struct tg_tls_session {
  tg_tls_config_t *cfg;
  mbedtls_ssl_context ssl;
  tg_buf_t in;  /* ciphertext received, not yet read by mbedtls */
  tg_buf_t out; /* ciphertext produced, not yet taken by the caller */
  bool done;    /* handshake complete and peer accepted */
  bool resumed; /* abbreviated handshake from a ticket */
  bool chain_verified; /* a certificate chain was verified in this handshake */
  const char *no_identity; /* why the peer's certificate names none (static) */
  bool offered; /* client: a saved session was handed to mbedtls */
  bool close_sent; /* our close_notify is in |out| */
  int dead;     /* sticky failure status, 0 while usable */
  bool has_identity;
  char identity[TG_TLS_IDENTITY_MAX + 1];
  char *hostname; /* client: the name the server must carry */
#if TG_TLS_LIBCRYPTO
  /* NULL when mbedtls carries the records; else, once started, every
   * record after the handshake goes through it. */
  tg_tls_handoff_t *handoff;
  /* Server: the ephemeral key of a key exchange tls/kex.c took, between
   * its two steps (NULL otherwise). */
  void *kex_key;
#endif
  /* Once the records are handed over, |ssl| is freed (its keys wiped with
   * it): what is still asked of the session after that is kept here. */
  bool released;
  const char *suite;          /* mbedtls's static name of the suite */
  bool has_saved;             /* client: |saved| holds the session */
  mbedtls_ssl_session saved;  /* its ticket, for tg_tls_session_save() */
  char why[512];
};

/* ECDHE groups offered and chosen, cheapest first: mbedtls 2.28 offers
 * the strongest first, so two mbedtls peers would settle on secp521r1,
 * several times the cost of x25519 at each end of every handshake, and a
 * fleet pays that per host (docs/operations.md has the figures). Every
 * other group of the build follows, so no peer that worked before is
 * refused. */
static const mbedtls_ecp_group_id preferred_groups[] = {
    MBEDTLS_ECP_DP_CURVE25519, MBEDTLS_ECP_DP_SECP256R1,
    MBEDTLS_ECP_DP_SECP384R1};

static void order_groups(mbedtls_ecp_group_id *out, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < sizeof(preferred_groups) / sizeof(preferred_groups[0]);
       i++)
    if (mbedtls_ecp_curve_info_from_grp_id(preferred_groups[i]) && n + 1 < cap)
      out[n++] = preferred_groups[i];
  for (const mbedtls_ecp_group_id *g = mbedtls_ecp_grp_id_list();
       *g != MBEDTLS_ECP_DP_NONE && n + 1 < cap; g++) {
    bool seen = false;
    for (size_t i = 0; i < n; i++) seen |= out[i] == *g;
    if (!seen) out[n++] = *g;
  }
  out[n] = MBEDTLS_ECP_DP_NONE;
}

/* ECDHE + AEAD only; the server's order decides. With the records
 * handed to libcrypto (tls/handoff.h) and AES instructions in the CPU,
 * AES-128-GCM first: libcrypto's is its fastest AEAD there
 * (bench_tls_cipher). Otherwise CHACHA20-POLY1305 first: mbedtls 2.28's
 * own GCM hashes one block per call, and without AES instructions AES is
 * slow in any library. */
static const int suites_chacha_first[] = {
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
};
static const int suites_aes_first[] = {
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
};
_Static_assert(sizeof(suites_aes_first) == sizeof(suites_chacha_first),
               "the same suites in two orders");
#define N_SUITES (sizeof(suites_aes_first) / sizeof(suites_aes_first[0]))

bool tg_tls_cpu_has_aes(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul");
#elif defined(__aarch64__) && defined(HWCAP_AES) && defined(HWCAP_PMULL)
  unsigned long hw = getauxval(AT_HWCAP);
  return (hw & HWCAP_AES) && (hw & HWCAP_PMULL);
#else
  return false;
#endif
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

static void mbed_text(int ret, char *buf, size_t len) {
  mbedtls_strerror(ret, buf, len);
}

/* Whether |path| can be opened, with errno's reason in |err| when not:
 * mbedtls reports every I/O problem as one "file I/O error". */
static int check_readable(const char *what, const char *path, char *err,
                          size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    set_err(err, errlen, "%s %s: %s", what, path, strerror(errno));
    tg_notice_prefix(err, errlen, TG_N_TLS_FILE_UNREADABLE);
    return TG_EBAD_CONFIG;
  }
  fclose(f);
  return 0;
}

static int load_crt(mbedtls_x509_crt *crt, const char *what, const char *path,
                    char *err, size_t errlen) {
  int rv = check_readable(what, path, err, errlen);
  if (rv) return rv;
  int ret = mbedtls_x509_crt_parse_file(crt, path);
  if (ret == MBEDTLS_ERR_X509_ALLOC_FAILED) return -ENOMEM;
  if (ret < 0) {
    char m[160];
    mbed_text(ret, m, sizeof(m));
    set_err(err, errlen, "%s %s: not a valid PEM certificate: %s (-0x%04x)",
            what, path, m, (unsigned)-ret);
    return TG_EBAD_CONFIG;
  }
  if (ret > 0) {
    set_err(err, errlen, "%s %s: %d certificate(s) in it do not parse", what,
            path, ret);
    return TG_EBAD_CONFIG;
  }
  return 0;
}

static void config_destroy(tg_tls_config_t *cfg) {
  mbedtls_ssl_config_free(&cfg->conf);
  mbedtls_ssl_ticket_free(&cfg->ticket);
  mbedtls_ctr_drbg_free(&cfg->drbg);
  mbedtls_entropy_free(&cfg->entropy);
  mbedtls_x509_crt_free(&cfg->ca);
  mbedtls_x509_crt_free(&cfg->own_cert);
  mbedtls_pk_free(&cfg->own_key);
  if (cfg->crl) {
    mbedtls_x509_crl_free(cfg->crl);
    free(cfg->crl);
  }
  free(cfg->crl_file);
  free(cfg);
}

void tg_tls_config_free(tg_tls_config_t *cfg) {
  if (cfg) config_destroy(cfg);
}

bool tg_tls_config_is_server(const tg_tls_config_t *cfg) {
  return cfg->server;
}

static int load_identity(tg_tls_config_t *cfg, const tg_tls_opts_t *o,
                         char *err, size_t errlen) {
  int rv = load_crt(&cfg->own_cert, "certificate", o->cert_file, err, errlen);
  if (rv) return rv;
  rv = check_readable("key", o->key_file, err, errlen);
  if (rv) return rv;
  int ret = mbedtls_pk_parse_keyfile(&cfg->own_key, o->key_file, NULL);
  if (ret != 0) {
    char m[160];
    mbed_text(ret, m, sizeof(m));
    set_err(err, errlen, "key %s: %s (-0x%04x)", o->key_file, m,
            (unsigned)-ret);
    return TG_EBAD_CONFIG;
  }
  if (mbedtls_pk_check_pair(&cfg->own_cert.pk, &cfg->own_key) != 0) {
    set_err(err, errlen, "key %s does not match certificate %s", o->key_file,
            o->cert_file);
    tg_notice_prefix(err, errlen, TG_N_TLS_KEY_MISMATCH);
    return TG_EBAD_CONFIG;
  }
#if TG_TLS_LIBCRYPTO
  if (cfg->libcrypto_signatures) tg_tls_ecdsa_adopt(&cfg->own_key);
#endif
  ret = mbedtls_ssl_conf_own_cert(&cfg->conf, &cfg->own_cert, &cfg->own_key);
  if (ret != 0) return -ENOMEM;
  return 0;
}

/* Server side of the ticket callbacks: mbedtls's own AEAD ticket code,
 * plus a note on the session being resumed (mbedtls keeps that fact in
 * its handshake state, which is gone by the time the handshake returns). */
static int ticket_write(void *p, const mbedtls_ssl_session *session,
                        unsigned char *start, const unsigned char *end,
                        size_t *tlen, uint32_t *lifetime) {
  tg_tls_config_t *cfg = p;
  return mbedtls_ssl_ticket_write(&cfg->ticket, session, start, end, tlen,
                                  lifetime);
}

static int ticket_parse(void *p, mbedtls_ssl_session *session,
                        unsigned char *buf, size_t len) {
  tg_tls_config_t *cfg = p;
  int ret = mbedtls_ssl_ticket_parse(&cfg->ticket, session, buf, len);
  if (ret == 0 && tl_handshaking) tl_handshaking->resumed = true;
  return ret;
}

/* Tickets: a server issues them when asked to (ticket_lifetime_s > 0),
 * sealed with AES-256-GCM under keys drawn from the DRBG now, held in
 * memory only and rotated by mbedtls every lifetime (a ticket is accepted
 * for at most one lifetime after it was issued); a restart forgets them.
 * A client always accepts tickets: it resumes only when its owner hands it
 * a saved session (tg_tls_session_offer()). */
static int setup_tickets(tg_tls_config_t *cfg, const tg_tls_opts_t *o,
                         char *err, size_t errlen) {
#if defined(MBEDTLS_SSL_SESSION_TICKETS) && defined(MBEDTLS_SSL_TICKET_C)
  if (!o->server) {
    mbedtls_ssl_conf_session_tickets(&cfg->conf,
                                     MBEDTLS_SSL_SESSION_TICKETS_ENABLED);
    return 0;
  }
  mbedtls_ssl_conf_session_tickets(&cfg->conf,
                                   MBEDTLS_SSL_SESSION_TICKETS_DISABLED);
  if (o->ticket_lifetime_s == 0) return 0;
  if (o->ticket_lifetime_s > TG_TLS_TICKET_LIFETIME_MAX_S) {
    set_err(err, errlen, "ticket lifetime %u s is over the maximum %u s",
            (unsigned)o->ticket_lifetime_s, TG_TLS_TICKET_LIFETIME_MAX_S);
    return TG_EBAD_CONFIG;
  }
  int ret = mbedtls_ssl_ticket_setup(&cfg->ticket, mbedtls_ctr_drbg_random,
                                     &cfg->drbg, MBEDTLS_CIPHER_AES_256_GCM,
                                     o->ticket_lifetime_s);
  if (ret != 0) {
    char m[160];
    mbed_text(ret, m, sizeof(m));
    set_err(err, errlen, "cannot set up session tickets: %s (-0x%04x)", m,
            (unsigned)-ret);
    return ret == MBEDTLS_ERR_SSL_ALLOC_FAILED ? -ENOMEM : TG_ETLS;
  }
  mbedtls_ssl_conf_session_tickets_cb(&cfg->conf, ticket_write, ticket_parse,
                                      cfg);
  cfg->tickets = true;
  return 0;
#else
  (void)cfg;
  if (o->server && o->ticket_lifetime_s) {
    set_err(err, errlen, "this mbedtls build has no session tickets");
    return TG_EBAD_CONFIG;
  }
  return 0;
#endif
}

/* A client's max_fragment_length (RFC 6066): one of four sizes. */
static int setup_max_fragment(tg_tls_config_t *cfg, const tg_tls_opts_t *o,
                              char *err, size_t errlen) {
  if (o->max_fragment_len == 0) return 0;
#if defined(MBEDTLS_SSL_MAX_FRAGMENT_LENGTH)
  unsigned char code = o->max_fragment_len == 512    ? MBEDTLS_SSL_MAX_FRAG_LEN_512
                       : o->max_fragment_len == 1024 ? MBEDTLS_SSL_MAX_FRAG_LEN_1024
                       : o->max_fragment_len == 2048 ? MBEDTLS_SSL_MAX_FRAG_LEN_2048
                       : o->max_fragment_len == 4096 ? MBEDTLS_SSL_MAX_FRAG_LEN_4096
                                                     : 0;
  if (o->server || code == 0) {
    set_err(err, errlen, "max_fragment_length %u: %s", o->max_fragment_len,
            o->server ? "a client asks for it, not a server"
                      : "must be 512, 1024, 2048 or 4096");
    return TG_EBAD_CONFIG;
  }
  return mbedtls_ssl_conf_max_frag_len(&cfg->conf, code) == 0 ? 0
                                                              : TG_EBAD_CONFIG;
#else
  (void)cfg;
  set_err(err, errlen, "this mbedtls build has no max_fragment_length");
  return TG_EBAD_CONFIG;
#endif
}

#if TG_TLS_LIBCRYPTO
/* mbedtls's key export: the master secret of the handshake under way,
 * for tls/handoff.c. */
static int export_keys(void *p, const unsigned char *ms,
                       const unsigned char *kb, size_t maclen, size_t keylen,
                       size_t ivlen, const unsigned char client_random[32],
                       const unsigned char server_random[32],
                       mbedtls_tls_prf_types prf) {
  (void)kb;
  (void)maclen;
  (void)keylen;
  (void)ivlen;
  (void)p;
  tg_tls_session_t *s = tl_handshaking;
  if (s && s->handoff)
    tg_tls_handoff_capture(s->handoff, ms, client_random, server_random, prf);
  return 0;
}
#endif

static int config_new(const tg_tls_opts_t *o, tg_tls_config_t **out,
                      char *err, size_t errlen);

/* Every refusal's reason leads with a code: its own where one was set,
 * else the general one. */
int tg_tls_config_new(const tg_tls_opts_t *o, tg_tls_config_t **out,
                      char *err, size_t errlen) {
  int rv = config_new(o, out, err, errlen);
  if (rv < 0 && err && errlen && strncmp(err, "[TG-", 4) != 0)
    tg_notice_prefix(err, errlen, TG_N_TLS_CONFIG_INVALID);
  return rv;
}

static int config_new(const tg_tls_opts_t *o, tg_tls_config_t **out,
                      char *err, size_t errlen) {
  set_err(err, errlen, "%s", "");
  *out = NULL;
  bool want_ca = !o->server || o->client_auth == TG_TLS_CLIENT_CERT_REQUIRED;
  if (o->server && (!o->cert_file || !o->key_file)) {
    set_err(err, errlen, "a TLS server needs a certificate and a key file");
    return TG_EBAD_CONFIG;
  }
  if (!o->cert_file != !o->key_file) {
    set_err(err, errlen, "certificate and key files go together");
    return TG_EBAD_CONFIG;
  }
  if (want_ca && !o->ca_file) {
    set_err(err, errlen, "a CA file is needed to verify the %s",
            o->server ? "clients" : "server");
    return TG_EBAD_CONFIG;
  }
  if (o->client_auth != TG_TLS_CLIENT_CERT_REQUIRED &&
      o->client_auth != TG_TLS_CLIENT_CERT_NONE) {
    set_err(err, errlen, "invalid client_auth %d", (int)o->client_auth);
    return TG_EBAD_CONFIG;
  }

  tg_tls_config_t *cfg = calloc(1, sizeof(*cfg));
  if (!cfg) return -ENOMEM;
  cfg->server = o->server;
  cfg->client_auth = o->client_auth;
  mbedtls_ssl_config_init(&cfg->conf);
  mbedtls_entropy_init(&cfg->entropy);
  mbedtls_ctr_drbg_init(&cfg->drbg);
  mbedtls_x509_crt_init(&cfg->ca);
  mbedtls_x509_crt_init(&cfg->own_cert);
  mbedtls_pk_init(&cfg->own_key);
  mbedtls_ssl_ticket_init(&cfg->ticket);

  int rv;
  static const char pers[] = "tracegate-tls";
  int ret = mbedtls_ctr_drbg_seed(&cfg->drbg, mbedtls_entropy_func,
                                  &cfg->entropy, (const unsigned char *)pers,
                                  sizeof(pers) - 1);
  if (ret != 0) {
    char m[160];
    mbed_text(ret, m, sizeof(m));
    set_err(err, errlen, "cannot seed the random generator: %s", m);
    rv = TG_ETLS;
    goto fail;
  }
  ret = mbedtls_ssl_config_defaults(
      &cfg->conf, o->server ? MBEDTLS_SSL_IS_SERVER : MBEDTLS_SSL_IS_CLIENT,
      MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
  if (ret != 0) {
    set_err(err, errlen, "mbedtls_ssl_config_defaults: -0x%04x",
            (unsigned)-ret);
    rv = TG_ETLS;
    goto fail;
  }
  mbedtls_ssl_conf_rng(&cfg->conf, mbedtls_ctr_drbg_random, &cfg->drbg);
  mbedtls_ssl_conf_min_version(&cfg->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
                               MBEDTLS_SSL_MINOR_VERSION_3);
  mbedtls_ssl_conf_max_version(&cfg->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
                               MBEDTLS_SSL_MINOR_VERSION_3);
  size_t n = 0;
  int only = o->ciphersuite ? mbedtls_ssl_get_ciphersuite_id(o->ciphersuite) : 0;
  /* The paths the process may take (decided and logged once). */
  const tg_tls_paths_t *paths = tg_tls_paths();
  cfg->handoff = !o->mbedtls_records && paths->records_libcrypto;
  cfg->libcrypto_signatures =
      !o->mbedtls_signatures && paths->signatures_libcrypto;
  cfg->libcrypto_kex = !o->mbedtls_kex && paths->kex_libcrypto;
  const int *wanted = cfg->handoff && tg_tls_cpu_has_aes()
                          ? suites_aes_first
                          : suites_chacha_first;
  _Static_assert(N_SUITES < sizeof(cfg->suites) / sizeof(cfg->suites[0]),
                 "room for the terminating 0");
  for (size_t i = 0; i < N_SUITES; i++)
    if (mbedtls_ssl_ciphersuite_from_id(wanted[i]) != NULL &&
        (!o->ciphersuite || wanted[i] == only))
      cfg->suites[n++] = wanted[i];
  cfg->suites[n] = 0;
  if (n == 0 && o->ciphersuite) {
    set_err(err, errlen, "ciphersuite %s is not one of the ECDHE+AEAD suites "
            "this build offers", o->ciphersuite);
    rv = TG_EBAD_CONFIG;
    goto fail;
  }
  if (n == 0) {
    set_err(err, errlen, "this mbedtls build has no ECDHE+AEAD ciphersuite");
    rv = TG_ETLS;
    goto fail;
  }
  mbedtls_ssl_conf_ciphersuites(&cfg->conf, cfg->suites);
  order_groups(cfg->groups, sizeof(cfg->groups) / sizeof(cfg->groups[0]));
  mbedtls_ssl_conf_curves(&cfg->conf, cfg->groups);
  mbedtls_ssl_conf_cert_profile(&cfg->conf, &mbedtls_x509_crt_profile_next);
#if defined(MBEDTLS_SSL_RENEGOTIATION)
  mbedtls_ssl_conf_renegotiation(&cfg->conf, MBEDTLS_SSL_RENEGOTIATION_DISABLED);
#endif
  rv = setup_tickets(cfg, o, err, errlen);
  if (rv) goto fail;
  rv = setup_max_fragment(cfg, o, err, errlen);
  if (rv) goto fail;
#if TG_TLS_LIBCRYPTO
  if (cfg->handoff)
    mbedtls_ssl_conf_export_keys_ext_cb(&cfg->conf, export_keys, cfg);
#endif
  if (o->server && o->client_auth == TG_TLS_CLIENT_CERT_NONE)
    mbedtls_ssl_conf_authmode(&cfg->conf, MBEDTLS_SSL_VERIFY_NONE);
  else
    mbedtls_ssl_conf_authmode(&cfg->conf, MBEDTLS_SSL_VERIFY_REQUIRED);

  if (o->ca_file) {
    rv = load_crt(&cfg->ca, "CA", o->ca_file, err, errlen);
    if (rv) goto fail;
  }
  if (o->cert_file) {
    rv = load_identity(cfg, o, err, errlen);
    if (rv) goto fail;
  }
  if (o->crl_file) {
    if (!o->ca_file) {
      set_err(err, errlen, "CRL %s given without a CA file", o->crl_file);
      rv = TG_EBAD_CONFIG;
      goto fail;
    }
    cfg->crl_file = strdup(o->crl_file);
    cfg->crl = malloc(sizeof(*cfg->crl));
    if (!cfg->crl_file || !cfg->crl) {
      free(cfg->crl);
      cfg->crl = NULL;
      rv = -ENOMEM;
      goto fail;
    }
    mbedtls_x509_crl_init(cfg->crl);
    rv = tg_crl_parse_file(cfg->crl, &cfg->ca, o->crl_file, err, errlen);
    if (rv) goto fail;
  }
  if (o->ca_file) mbedtls_ssl_conf_ca_chain(&cfg->conf, &cfg->ca, cfg->crl);
#if TG_TLS_LIBCRYPTO
  if (cfg->libcrypto_signatures) {
    /* The CA keys verify the peer's certificate (and the CRL); the peer's
     * own key, its signature on the handshake (note_verify). */
    for (mbedtls_x509_crt *ca = &cfg->ca; ca && ca->raw.p; ca = ca->next)
      if (tg_tls_ecdsa_adopt(&ca->pk) && o->server)
        /* A relay's clients are a fleet's few collectors, which bring the
         * same certificates at every connection, checked against the same
         * CRL: one verification of each signature, not two per handshake
         * (the client's signature on the handshake is still verified,
         * and mbedtls still checks the dates and whether the CRL lists
         * the certificate). A client meets a new server certificate at
         * every host. */
        tg_tls_ecdsa_remember(&ca->pk);
  }
#endif
  *out = cfg;
  return 0;

fail:
  if (rv == -ENOMEM && err && errlen && !err[0])
    set_err(err, errlen, "out of memory loading the TLS configuration");
  config_destroy(cfg);
  return rv;
}

int tg_tls_config_reload_crl(tg_tls_config_t *cfg, const char *path,
                             char *err, size_t errlen) {
  set_err(err, errlen, "%s", "");
  if (!path) path = cfg->crl_file;
  if (!path) {
    set_err(err, errlen, "no CRL file configured");
    return TG_EBAD_CONFIG;
  }
  if (cfg->ca.raw.p == NULL) {
    set_err(err, errlen, "CRL %s: no CA configured to check it against", path);
    return TG_EBAD_CONFIG;
  }
  char *npath = strdup(path);
  mbedtls_x509_crl *crl = malloc(sizeof(*crl));
  if (!npath || !crl) {
    free(npath);
    free(crl);
    return -ENOMEM;
  }
  mbedtls_x509_crl_init(crl);
  int rv = tg_crl_parse_file(crl, &cfg->ca, path, err, errlen);
  if (rv) {
    mbedtls_x509_crl_free(crl);
    free(crl);
    free(npath);
    return rv;
  }
  /* mbedtls reads conf->ca_crl only while verifying a certificate inside a
   * handshake call, never across calls, and everything runs on one thread:
   * the old list can go at once. */
  mbedtls_ssl_conf_ca_chain(&cfg->conf, &cfg->ca, crl);
  if (cfg->crl) {
    mbedtls_x509_crl_free(cfg->crl);
    free(cfg->crl);
  }
  cfg->crl = crl;
  free(cfg->crl_file);
  cfg->crl_file = npath;
  return 0;
}

/* --- sessions ------------------------------------------------------------ */

static int bio_send(void *ctx, const unsigned char *p, size_t n) {
  tg_tls_session_t *s = ctx;
  if (n > INT_MAX) n = INT_MAX;
  if (tg_buf_append(&s->out, p, n) < 0) return MBEDTLS_ERR_SSL_ALLOC_FAILED;
  return (int)n;
}

static int bio_recv(void *ctx, unsigned char *p, size_t n) {
  tg_tls_session_t *s = ctx;
  size_t have = tg_buf_size(&s->in);
  if (have == 0) return MBEDTLS_ERR_SSL_WANT_READ;
  if (n > have) n = have;
  if (n > INT_MAX) n = INT_MAX;
  memcpy(p, tg_buf_begin(&s->in), n);
  tg_buf_consume(&s->in, n);
  return (int)n;
}

/* Runs for each certificate of a chain mbedtls verifies, once the chain's
 * signatures are checked, from the root down: only in a full handshake,
 * never in one resumed from a ticket. Changes no verdict (|flags| stay as
 * mbedtls set them). The peer's key (depth 0) then checks its signature
 * on the handshake through libcrypto (tls/ecdsa.h). */
static int note_verify(void *ctx, mbedtls_x509_crt *crt, int depth,
                       uint32_t *flags) {
  tg_tls_session_t *s = ctx;
  s->chain_verified = true;
  /* A client certificate that names no identity fails the handshake
   * itself, so the client hears why before it thinks it is connected. */
  char id[TG_TLS_IDENTITY_MAX + 1];
  if (s->cfg->server && depth == 0 &&
      s->cfg->client_auth == TG_TLS_CLIENT_CERT_REQUIRED &&
      (s->no_identity = tg_cert_identity(crt, id)))
    *flags |= MBEDTLS_X509_BADCERT_OTHER;
#if TG_TLS_LIBCRYPTO
  if (s->cfg->libcrypto_signatures && depth == 0 && *flags == 0)
    tg_tls_ecdsa_adopt(&crt->pk);
#endif
  return 0;
}

int tg_tls_session_new(tg_tls_config_t *cfg, const char *hostname,
                       size_t in_max, tg_tls_session_t **out) {
  *out = NULL;
  if (!cfg->server && (!hostname || !hostname[0])) return -EINVAL;
  tg_tls_session_t *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->cfg = cfg;
  if (!cfg->server && !(s->hostname = strdup(hostname))) {
    free(s);
    return -ENOMEM;
  }
  tg_buf_init(&s->in, in_max ? in_max : DEFAULT_IN_MAX);
  tg_buf_init(&s->out, 0);
  mbedtls_ssl_init(&s->ssl);
  int ret = mbedtls_ssl_setup(&s->ssl, &cfg->conf);
  if (ret == 0 && !cfg->server) ret = mbedtls_ssl_set_hostname(&s->ssl, hostname);
  if (ret != 0) {
    mbedtls_ssl_free(&s->ssl);
    free(s->hostname);
    free(s);
    return ret == MBEDTLS_ERR_SSL_BAD_INPUT_DATA ? -EINVAL : -ENOMEM;
  }
#if TG_TLS_LIBCRYPTO
  if (cfg->handoff && !(s->handoff = calloc(1, sizeof(*s->handoff)))) {
    mbedtls_ssl_free(&s->ssl);
    free(s->hostname);
    free(s);
    return -ENOMEM;
  }
#endif
  mbedtls_ssl_session_init(&s->saved);
  mbedtls_ssl_set_bio(&s->ssl, s, bio_send, bio_recv, NULL);
  mbedtls_ssl_set_verify(&s->ssl, note_verify, s);
  *out = s;
  return 0;
}

void tg_tls_session_free(tg_tls_session_t *s) {
  if (!s) return;
#if TG_TLS_LIBCRYPTO
  if (s->handoff) {
    tg_tls_handoff_clear(s->handoff);
    free(s->handoff);
  }
  tg_tls_kex_server_abandon(&s->kex_key);
#endif
  if (!s->released) mbedtls_ssl_free(&s->ssl);
  mbedtls_ssl_session_free(&s->saved);
  tg_buf_free(&s->in);
  tg_buf_free(&s->out);
  free(s->hostname);
  free(s);
}

int tg_tls_feed(tg_tls_session_t *s, const uint8_t *data, size_t len) {
  return tg_buf_append(&s->in, data, len);
}

tg_buf_t *tg_tls_in(tg_tls_session_t *s) { return &s->in; }
tg_buf_t *tg_tls_out(tg_tls_session_t *s) { return &s->out; }

void tg_tls_swap_out(tg_tls_session_t *s, tg_buf_t *other) {
  tg_buf_t t = s->out;
  s->out = *other;
  *other = t;
}

static void why_append(tg_tls_session_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void why_append(tg_tls_session_t *s, const char *fmt, ...) {
  size_t used = strlen(s->why);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->why + used, sizeof(s->why) - used, fmt, ap);
  va_end(ap);
}

/* Appends mbedtls's verification flags, one reason after another. */
static void append_verify_info(tg_tls_session_t *s, uint32_t flags) {
  char info[384];
  int k = mbedtls_x509_crt_verify_info(info, sizeof(info), "", flags);
  if (k <= 0) return;
  for (char *p = info; *p; p++)
    if (*p == '\n') *p = ';';
  size_t len = strlen(info);
  while (len && (info[len - 1] == ';' || info[len - 1] == ' ')) info[--len] = 0;
  why_append(s, ": %s", info);
}

/* Translates a fatal mbedtls error, records why, and kills the session. */
static int fail(tg_tls_session_t *s, int ret, bool in_handshake) {
  mbed_text(ret, s->why, sizeof(s->why));
  why_append(s, " (-0x%04x)", (unsigned)-ret);
  uint32_t flags = s->released ? 0 : mbedtls_ssl_get_verify_result(&s->ssl);
  bool cert_flags = flags != 0 && flags != (uint32_t)-1;
  if (cert_flags && s->no_identity)
    why_append(s, ": the certificate names no identity (its CN, else its "
               "first DNS SAN): %s", s->no_identity);
  else if (cert_flags)
    append_verify_info(s, flags);

  int rv;
  switch (ret) {
    case MBEDTLS_ERR_SSL_ALLOC_FAILED:
    case MBEDTLS_ERR_X509_ALLOC_FAILED:
      rv = -ENOMEM;
      break;
    case MBEDTLS_ERR_X509_CERT_VERIFY_FAILED:
    case MBEDTLS_ERR_SSL_NO_CLIENT_CERTIFICATE:
      /* mbedtls 2.28 hangs up without telling the client why; say it, so
       * the client reports a refusal rather than a dropped connection. */
      (void)mbedtls_ssl_send_alert_message(&s->ssl,
                                           MBEDTLS_SSL_ALERT_LEVEL_FATAL,
                                           MBEDTLS_SSL_ALERT_MSG_HANDSHAKE_FAILURE);
      rv = TG_ETLS_CERT;
      break;
    case MBEDTLS_ERR_SSL_PEER_VERIFY_FAILED:
    case MBEDTLS_ERR_SSL_BAD_HS_CERTIFICATE:
      rv = TG_ETLS_CERT;
      break;
    case MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE:
      rv = TG_ETLS_PEER_ALERT;
      break;
    case MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY:
      rv = TG_EPEER_CLOSED;
      break;
    default:
      rv = cert_flags ? TG_ETLS_CERT
                      : in_handshake ? TG_ETLS_HANDSHAKE : TG_ETLS;
      break;
  }
  if (rv == TG_ETLS_CERT && !s->cfg->server) {
    /* The usual client mistake: connecting by IP address. */
    const char *h = s->hostname;
    if (h && (flags & MBEDTLS_X509_BADCERT_CN_MISMATCH) &&
        strspn(h, "0123456789.:abcdefABCDEF") == strlen(h)) {
      why_append(s,
                 " (expected '%s': mbedtls matches DNS names only, pass the "
                 "server's certificate name)",
                 h);
    }
  }
  s->dead = rv;
  return rv;
}

/* The peer's identity into the session. Returns NULL, or why it has none. */
static const char *extract_identity(tg_tls_session_t *s) {
  const mbedtls_x509_crt *crt = mbedtls_ssl_get_peer_cert(&s->ssl);
  if (!crt) return "no certificate";
  const char *why = tg_cert_identity(crt, s->identity);
  s->has_identity = !why;
  return why;
}

static int refuse_peer(tg_tls_session_t *s, unsigned char alert) {
  (void)mbedtls_ssl_send_alert_message(&s->ssl, MBEDTLS_SSL_ALERT_LEVEL_FATAL,
                                       alert);
  s->dead = TG_ETLS_CERT;
  return s->dead;
}

/* A session resumed from a ticket skips certificate verification: the
 * ticket carries the client certificate that was verified when it was
 * issued (MBEDTLS_SSL_KEEP_PEER_CERTIFICATE), and what may have changed
 * since is checked again here, as of now: the CRL in force, the validity
 * dates. The chain itself cannot have changed: the CA is fixed for the
 * config's life and the ticket is sealed by this process. */
static int recheck_resumed_client(tg_tls_session_t *s) {
  const mbedtls_x509_crt *crt = mbedtls_ssl_get_peer_cert(&s->ssl);
  if (s->cfg->client_auth != TG_TLS_CLIENT_CERT_REQUIRED) return 0;
  if (!crt || mbedtls_ssl_get_verify_result(&s->ssl) != 0) {
    snprintf(s->why, sizeof(s->why),
             "resumed session carries no verified client certificate");
    return refuse_peer(s, MBEDTLS_SSL_ALERT_MSG_BAD_CERT);
  }
  if (s->cfg->crl && tg_crl_revokes(s->cfg->crl, crt)) {
    snprintf(s->why, sizeof(s->why),
             "client certificate has been revoked (resumed session, checked "
             "against the CRL in force)");
    return refuse_peer(s, MBEDTLS_SSL_ALERT_MSG_CERT_REVOKED);
  }
  if (mbedtls_x509_time_is_past(&crt->valid_to) ||
      mbedtls_x509_time_is_future(&crt->valid_from)) {
    snprintf(s->why, sizeof(s->why),
             "client certificate has expired or is not yet valid (resumed "
             "session)");
    return refuse_peer(s, MBEDTLS_SSL_ALERT_MSG_CERT_EXPIRED);
  }
  return 0;
}

#if TG_TLS_LIBCRYPTO
/* The records are handed over: mbedtls carries nothing more for this
 * session, so its context goes, and with it (wiped by mbedtls_ssl_free)
 * its copy of the traffic keys, its record buffers and the peer's
 * certificate. What is still asked of the session after this is kept
 * first: the suite's name, and a client's session for its ticket. */
static void release_mbedtls(tg_tls_session_t *s) {
  s->suite = mbedtls_ssl_get_ciphersuite(&s->ssl);
#if defined(MBEDTLS_SSL_SESSION_TICKETS)
  /* Without memory for the copy the connection still works; only its
   * ticket cannot be saved (tg_tls_session_save says so). */
  if (!s->cfg->server)
    s->has_saved = mbedtls_ssl_get_session(&s->ssl, &s->saved) == 0;
#endif
  mbedtls_ssl_free(&s->ssl);
  s->released = true;
}
#endif

#if TG_TLS_LIBCRYPTO
/* mbedtls_ssl_handshake(), but the x25519 key exchange is made by
 * tls/kex.c: the client's one step, or the server's two, the second
 * whenever the first was taken. */
static int handshake_steps(tg_tls_session_t *s) {
  mbedtls_ssl_context *ssl = &s->ssl;
  while (ssl->state != MBEDTLS_SSL_HANDSHAKE_OVER) {
    int ret;
    if (s->kex_key && ssl->state == MBEDTLS_SSL_CLIENT_KEY_EXCHANGE)
      ret = tg_tls_kex_server_finish(ssl, &s->kex_key);
    else if (tg_tls_kex_server_applies(ssl))
      ret = tg_tls_kex_server_params(ssl, &s->kex_key);
    else if (tg_tls_kex_applies(ssl))
      ret = tg_tls_kex_client_step(ssl);
    else
      ret = mbedtls_ssl_handshake_step(ssl);
    if (ret != 0) return ret;
  }
  return 0;
}
#else
static int handshake_steps(tg_tls_session_t *s) {
  return mbedtls_ssl_handshake(&s->ssl);
}
#endif

int tg_tls_handshake(tg_tls_session_t *s) {
  if (s->done) return 0;
  if (s->dead) return s->dead;
  tl_handshaking = s;
  int ret = s->cfg->libcrypto_kex ? handshake_steps(s)
                                  : mbedtls_ssl_handshake(&s->ssl);
  tl_handshaking = NULL;
  if (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE)
    return -EAGAIN;
  if (ret != 0) return fail(s, ret, true);
  /* A client that verified no chain resumed: mbedtls verifies the server's
   * certificate in every full handshake (VERIFY_REQUIRED). */
  if (!s->cfg->server) s->resumed = s->offered && !s->chain_verified;
  const char *no_id = extract_identity(s);
  if (s->cfg->server && s->cfg->client_auth == TG_TLS_CLIENT_CERT_REQUIRED &&
      no_id) {
    snprintf(s->why, sizeof(s->why),
             "client certificate names no identity (its CN, else its first "
             "DNS SAN): %s", no_id);
    return refuse_peer(s, MBEDTLS_SSL_ALERT_MSG_BAD_CERT);
  }
  if (s->cfg->server && s->resumed) {
    int rv = recheck_resumed_client(s);
    if (rv) return rv;
  }
  s->done = true;
#if TG_TLS_LIBCRYPTO
  if (s->handoff) {
    int rv = tg_tls_handoff_start(s->handoff, &s->ssl, s->cfg->server);
    if (rv == -ENOMEM) return -ENOMEM;
    if (rv) {
      /* A cipher libcrypto lacks: mbedtls keeps the records, slower. */
      tg_tls_handoff_clear(s->handoff);
      free(s->handoff);
      s->handoff = NULL;
    } else {
      release_mbedtls(s);
    }
  }
#endif
  return 0;
}

#if TG_TLS_LIBCRYPTO
/* A failure of the records after the handoff: sticky, like fail(). */
static int handoff_failed(tg_tls_session_t *s, int rv) {
  if (rv == -ENOBUFS || rv == -ENOMEM) return rv; /* the caller's buffer */
  s->dead = rv;
  return rv;
}
#endif

int tg_tls_read(tg_tls_session_t *s, uint8_t *buf, size_t cap, size_t *n) {
  *n = 0;
  if (s->dead) return s->dead;
  if (!s->done || cap == 0) return -EINVAL;
#if TG_TLS_LIBCRYPTO
  if (s->handoff) {
    int rv = tg_tls_handoff_read(s->handoff, &s->in, &s->out, buf, cap, n,
                                 s->why, sizeof(s->why));
    return rv == 0 || rv == -EAGAIN ? rv : handoff_failed(s, rv);
  }
#endif
  if (cap > INT_MAX) cap = INT_MAX;
  int ret = mbedtls_ssl_read(&s->ssl, buf, cap);
  if (ret > 0) {
    *n = (size_t)ret;
    return 0;
  }
  if (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE)
    return -EAGAIN;
  if (ret == 0) ret = MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY;
  return fail(s, ret, false);
}

int tg_tls_write(tg_tls_session_t *s, const uint8_t *data, size_t len) {
  if (s->dead) return s->dead;
  if (!s->done) return -EINVAL;
#if TG_TLS_LIBCRYPTO
  if (s->handoff) {
    int rv = tg_tls_handoff_write(s->handoff, &s->out, data, len);
    if (rv) snprintf(s->why, sizeof(s->why), "sealing a record failed");
    return rv ? handoff_failed(s, rv) : 0;
  }
#endif
  while (len > 0) {
    int ret = mbedtls_ssl_write(&s->ssl, data, len);
    if (ret <= 0) {
      /* Our BIO never blocks, so WANT_* or 0 cannot happen: if it did,
       * looping would spin; fail instead. */
      if (ret == 0 || ret == MBEDTLS_ERR_SSL_WANT_READ ||
          ret == MBEDTLS_ERR_SSL_WANT_WRITE) {
        snprintf(s->why, sizeof(s->why), "mbedtls_ssl_write made no progress");
        s->dead = TG_ETLS;
        return s->dead;
      }
      return fail(s, ret, false);
    }
    data += ret;
    len -= (size_t)ret;
  }
  return 0;
}

void tg_tls_close_notify(tg_tls_session_t *s) {
  /* Also the answer to the peer's own close_notify (RFC 5246 7.2.1). */
  if (!s->done || s->close_sent || (s->dead && s->dead != TG_EPEER_CLOSED))
    return;
  s->close_sent = true;
#if TG_TLS_LIBCRYPTO
  if (s->handoff) {
    (void)tg_tls_handoff_alert(s->handoff, &s->out, 1, 0);
    return;
  }
#endif
  (void)mbedtls_ssl_close_notify(&s->ssl);
}

const char *tg_tls_peer_identity(const tg_tls_session_t *s) {
  return s->has_identity ? s->identity : NULL;
}

const char *tg_tls_last_error(const tg_tls_session_t *s) { return s->why; }

const char *tg_tls_ciphersuite(const tg_tls_session_t *s) {
  if (!s->done) return "none";
  const char *n = s->released ? s->suite : mbedtls_ssl_get_ciphersuite(&s->ssl);
  return n ? n : "none";
}

const char *tg_tls_records(const tg_tls_session_t *s) {
  if (!s->done) return "none";
  return s->released ? "libcrypto" : "mbedtls";
}

bool tg_tls_mbedtls_released(const tg_tls_session_t *s) {
  return s->released;
}

bool tg_tls_session_resumed(const tg_tls_session_t *s) {
  return s->done && s->resumed;
}

int tg_tls_session_offer(tg_tls_session_t *s, const uint8_t *data_untrusted,
                         size_t len) {
  if (s->cfg->server || s->done || s->dead || s->offered) return -EINVAL;
  if (len == 0 || len > SAVED_SESSION_MAX) return -EINVAL;
  mbedtls_ssl_session sess;
  mbedtls_ssl_session_init(&sess);
  int ret = mbedtls_ssl_session_load(&sess, data_untrusted, len);
  int rv = 0;
  if (ret == MBEDTLS_ERR_SSL_ALLOC_FAILED) rv = -ENOMEM;
  else if (ret != 0) rv = -EINVAL; /* another build's, or not a session */
  if (rv == 0) {
#if defined(MBEDTLS_SSL_SESSION_TICKETS)
    if (sess.ticket == NULL || sess.ticket_len == 0) rv = -EINVAL;
#endif
  }
  if (rv == 0) {
    ret = mbedtls_ssl_set_session(&s->ssl, &sess);
    if (ret == MBEDTLS_ERR_SSL_ALLOC_FAILED) rv = -ENOMEM;
    else if (ret != 0) rv = -EINVAL;
  }
  mbedtls_ssl_session_free(&sess);
  if (rv == 0) s->offered = true;
  return rv;
}

int tg_tls_session_save(const tg_tls_session_t *s, uint8_t **out,
                        size_t *len, uint64_t *expires) {
  *out = NULL;
  *len = 0;
  *expires = 0;
  if (s->cfg->server || !s->done || s->dead) return -EINVAL;
#if defined(MBEDTLS_SSL_SESSION_TICKETS)
  mbedtls_ssl_session sess;
  mbedtls_ssl_session_init(&sess);
  int ret = 0;
  if (!s->released) ret = mbedtls_ssl_get_session(&s->ssl, &sess);
  const mbedtls_ssl_session *got = s->released ? &s->saved : &sess;
  int rv = 0;
  if (s->released && !s->has_saved) rv = TG_ETLS;
  else if (ret == MBEDTLS_ERR_SSL_ALLOC_FAILED) rv = -ENOMEM;
  else if (ret != 0) rv = TG_ETLS;
  else if (got->ticket == NULL || got->ticket_len == 0) rv = -ENOENT;
  size_t need = 0;
  if (rv == 0) {
    ret = mbedtls_ssl_session_save(got, NULL, 0, &need);
    if (ret != MBEDTLS_ERR_SSL_BUFFER_TOO_SMALL || need == 0 ||
        need > SAVED_SESSION_MAX)
      rv = TG_ETLS;
  }
  uint8_t *buf = rv == 0 ? malloc(need) : NULL;
  if (rv == 0 && !buf) rv = -ENOMEM;
  if (rv == 0 && mbedtls_ssl_session_save(got, buf, need, &need) != 0)
    rv = TG_ETLS;
  if (rv == 0) {
    /* The ticket lives from the full handshake that earned it (start,
     * kept across resumptions) for the server's hint, within our cap. */
    uint32_t life = got->ticket_lifetime;
    if (life == 0) life = TG_TLS_TICKET_LIFETIME_DEFAULT_S;
    if (life > CLIENT_TICKET_MAX_S) life = CLIENT_TICKET_MAX_S;
    int64_t start = (int64_t)got->start;
    *expires = start > 0 ? (uint64_t)start + life : 0;
    *out = buf;
    *len = need;
    buf = NULL;
  }
  if (buf) {
    mbedtls_platform_zeroize(buf, need);
    free(buf);
  }
  mbedtls_ssl_session_free(&sess);
  return rv;
#else
  return -ENOENT;
#endif
}

static void sha256_chain(const mbedtls_x509_crt *crt, uint8_t out[32]) {
  mbedtls_sha256_context c;
  mbedtls_sha256_init(&c);
  mbedtls_sha256_starts_ret(&c, 0);
  for (; crt && crt->raw.p; crt = crt->next)
    mbedtls_sha256_update_ret(&c, crt->raw.p, crt->raw.len);
  mbedtls_sha256_finish_ret(&c, out);
  mbedtls_sha256_free(&c);
}

void tg_tls_config_fingerprints(const tg_tls_config_t *cfg,
                                uint8_t own[TG_TLS_FINGERPRINT_SIZE],
                                uint8_t ca[TG_TLS_FINGERPRINT_SIZE]) {
  sha256_chain(&cfg->own_cert, own);
  sha256_chain(&cfg->ca, ca);
}
