/* libcrypto's start without its exit handler (libcrypto_init.h). */
#include "common/libcrypto_init.h"

#include <errno.h>
#include <pthread.h>

#include <openssl/crypto.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_status;

static void init_once(void) {
  g_status = OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL) == 1 ? 0 : -EIO;
}

int tg_libcrypto_init(void) {
  pthread_once(&g_once, init_once);
  return g_status;
}
