/* tls/kex_test.h: what tests read of tls/kex.c, kept out of the header
 * the product includes. */
#ifndef TRACEGATE_TLS_KEX_TEST_H
#define TRACEGATE_TLS_KEX_TEST_H

/* How many handshakes took the client's step, and the server's second
 * step, for tests. */
unsigned long tg_tls_kex_count(void);
unsigned long tg_tls_kex_server_count(void);

#endif /* TRACEGATE_TLS_KEX_TEST_H */
