/* OpenSSL's libcrypto started once per process, without its exit handler.
 *
 * By default libcrypto registers an atexit handler (OPENSSL_cleanup) the
 * first time anything uses it. That handler runs before libuv's pool
 * threads are stopped (they live until the libraries' destructors), so a
 * handshake or a signature still running on one of them at exit reads
 * state the handler has freed; and what those threads hold is left
 * unreachable, which the sanitizer trees' leak check reports. With
 * OPENSSL_INIT_NO_ATEXIT (OpenSSL 3, documented in OPENSSL_init_crypto(3))
 * the state stays until the process is gone, which frees it anyway.
 *
 * The flag only counts at libcrypto's first initialisation: call this
 * before anything else uses libcrypto, libcurl and libwebsockets
 * included (they start it themselves). Programs call it first in main;
 * tls/ and the bucket client call it on their way in too, for the tests
 * that use them without those programs' main. */
#ifndef TRACEGATE_COMMON_LIBCRYPTO_INIT_H
#define TRACEGATE_COMMON_LIBCRYPTO_INIT_H

/* Once per process, from any thread; 0 or -EIO when libcrypto refused to
 * start (it then works as it would have without the call). */
int tg_libcrypto_init(void);

#endif /* TRACEGATE_COMMON_LIBCRYPTO_INIT_H */
