/* Which library carries each part of TLS: see tls/paths.h. */
#include "tls/paths.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <mbedtls/version.h>

#include "common/log.h"
#if TG_TLS_LIBCRYPTO
#include <openssl/crypto.h>

#include "common/libcrypto_init.h"

#include "tls/ecdsa.h"
#include "tls/kex.h"
#endif

void tg_tls_paths_decide(tg_tls_paths_t *p, uint32_t runtime_version) {
  memset(p, 0, sizeof(*p));
#if TG_TLS_LIBCRYPTO
  (void)tg_libcrypto_init(); /* before the self-tests use it */
  p->records_libcrypto = true;
  if (runtime_version != MBEDTLS_VERSION_NUMBER) {
    char why[sizeof(p->signatures_why)];
    snprintf(why, sizeof(why),
             "mbedtls %u.%u.%u runs, %s was compiled against: the path "
             "reaches into mbedtls's internals",
             (unsigned)(runtime_version >> 24),
             (unsigned)(runtime_version >> 16 & 0xff),
             (unsigned)(runtime_version >> 8 & 0xff), MBEDTLS_VERSION_STRING);
    memcpy(p->signatures_why, why, sizeof(why));
    memcpy(p->kex_why, why, sizeof(why));
    return;
  }
  const char *why = tg_tls_ecdsa_self_test();
  if (why)
    snprintf(p->signatures_why, sizeof(p->signatures_why),
             "the ECDSA path's self-test failed: %s", why);
  else
    p->signatures_libcrypto = true;
  why = tg_tls_kex_built() ? tg_tls_kex_self_test()
                           : "this mbedtls's configuration keeps the key "
                             "exchange out of the step's reach";
  if (why)
    snprintf(p->kex_why, sizeof(p->kex_why),
             "the key exchange path's self-test failed: %s", why);
  else
    p->kex_libcrypto = true;
#else
  (void)runtime_version;
#endif
}

void tg_tls_paths_describe(const tg_tls_paths_t *p, char *buf, size_t cap) {
  char mbed[16];
  mbedtls_version_get_string(mbed);
#if TG_TLS_LIBCRYPTO
  char why[sizeof(p->signatures_why) + 4] = "";
  if (p->signatures_why[0])
    snprintf(why, sizeof(why), " (%s)", p->signatures_why);
  char kwhy[sizeof(p->kex_why) + 4] = "";
  if (p->kex_why[0]) snprintf(kwhy, sizeof(kwhy), " (%s)", p->kex_why);
  snprintf(buf, cap, "TLS: handshakes by mbedtls %s; x25519 by "
           "%s%s; records by %s; ECDSA by %s%s", mbed,
           p->kex_libcrypto ? "libcrypto" : "mbedtls", kwhy,
           p->records_libcrypto ? OpenSSL_version(OPENSSL_VERSION) : "mbedtls",
           p->signatures_libcrypto ? "libcrypto" : "mbedtls", why);
#else
  (void)p;
  snprintf(buf, cap,
           "TLS: handshakes by mbedtls %s; x25519 by mbedtls; "
           "records by mbedtls; ECDSA by mbedtls (built without libcrypto)",
           mbed);
#endif
}

static tg_tls_paths_t g_paths;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void decide_once(void) {
  tg_tls_paths_decide(&g_paths, mbedtls_version_get_number());
  char line[640];
  tg_tls_paths_describe(&g_paths, line, sizeof(line));
  TG_INFO("%s", line);
}

const tg_tls_paths_t *tg_tls_paths(void) {
  pthread_once(&g_once, decide_once);
  return &g_paths;
}
