/* tls/session.h: TLS for the relay and the remote consumer, mbedtls behind
 * a small API, on memory buffers, with no I/O of its own (the socket side
 * is tls/transport.h).
 *
 * A tg_tls_config_t is loaded once from PEM files (certificate, key, CA,
 * optional CRL) and shared by many sessions. Policy is fixed here, not in
 * callers: TLS 1.2 only, ECDHE key exchange with AEAD ciphers only
 * (AES-GCM, CHACHA20-POLY1305), no renegotiation, the peer's certificate
 * always verified against the CA (and CRL); a server requires a client
 * certificate unless told otherwise.
 *
 * Resumption: session tickets (RFC 5077) only, no server-side session
 * cache. A server issues tickets when its options give them a lifetime;
 * their keys live in its memory only (a restart invalidates every ticket)
 * and a resumed client's certificate, carried inside the ticket, is
 * checked again against the CRL in force and its validity dates. A client
 * resumes only when its owner offers a session saved from an earlier
 * connection (tg_tls_session_save / tg_tls_session_offer); whether it
 * did is tg_tls_session_resumed(). docs/security.md says what this trades.
 *
 *   socket --ciphertext--> tg_tls_feed() --> [in] --> mbedtls
 *   mbedtls --> [out] --> tg_tls_out() --ciphertext--> socket
 *   tg_tls_read() <-- plaintext          plaintext --> tg_tls_write()
 *
 * The caller moves ciphertext between the socket and the two buffers and
 * drives the state machine: tg_tls_handshake() until it returns 0, then
 * tg_tls_read() until -EAGAIN after each feed (mbedtls may hold decrypted
 * bytes beyond what one call returns). Writing never blocks: records go to
 * the output buffer, which the caller drains at its own pace.
 *
 * Errors are translated at this boundary into tracegate codes
 * (tracegate/error.h); the raw mbedtls value and its text are kept for logs
 * (tg_tls_last_error()). Nothing here logs (but tls/paths.h, once per
 * process): the transport knows the peer address and logs once with it.
 *
 * Threads: a session is used by one thread at a time. Sessions of one
 * config may run on several threads at once (mbedtls's DRBG is locked,
 * the config is read only, the callbacks find their session through a
 * thread-local); tg_tls_config_reload_crl() frees the old CRL, so it must
 * not run while any session of the config is inside a call.
 */
#ifndef TRACEGATE_TLS_SESSION_H
#define TRACEGATE_TLS_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/identity.h"

/* Longest identity tg_tls_peer_identity() returns (common/identity.h). */
#define TG_TLS_IDENTITY_MAX TG_IDENTITY_MAX

/* Session tickets: the relay's default lifetime, and the longest allowed.
 * Short on purpose: a ticket key, while it lives, opens every session
 * resumed under it. */
#define TG_TLS_TICKET_LIFETIME_DEFAULT_S 3600u
#define TG_TLS_TICKET_LIFETIME_MAX_S 86400u

/* SHA-256 of certificates (tg_tls_config_fingerprints). */
#define TG_TLS_FINGERPRINT_SIZE 32

typedef struct tg_tls_config tg_tls_config_t;
typedef struct tg_tls_session tg_tls_session_t;

typedef enum tg_tls_client_auth {
  /* Server: a client certificate signed by the CA is mandatory (default). */
  TG_TLS_CLIENT_CERT_REQUIRED = 0,
  /* Server: no client certificate is asked for (e.g. behind another
   * authenticating layer). Never the default: zero means required. */
  TG_TLS_CLIENT_CERT_NONE = 1,
} tg_tls_client_auth_t;

typedef struct tg_tls_opts {
  bool server;
  /* PEM files, read during tg_tls_config_new() only (the paths are copied
   * for tg_tls_config_reload_crl()). A server needs cert_file and key_file;
   * a client may omit both (then it has no certificate to offer). ca_file
   * is required: it verifies the peer. crl_file is optional. */
  const char *cert_file;
  const char *key_file;
  const char *ca_file;
  const char *crl_file;
  /* Server only. Zero-initialised options require client certificates. */
  tg_tls_client_auth_t client_auth;
  /* Server only: issue session tickets accepted for this many seconds
   * (at most TG_TLS_TICKET_LIFETIME_MAX_S); 0: no tickets, every
   * handshake is a full one. Clients always accept tickets. */
  uint32_t ticket_lifetime_s;
  /* Keep mbedtls's own record layer after the handshake. By default the
   * records go through tls/record.c (libcrypto) where tls/paths.h allows
   * it; the wire is the same TLS 1.2 either way. For tests and benches
   * that compare. */
  bool mbedtls_records;
  /* false (the default): the handshake's ECDSA signatures are made and
   * checked by libcrypto (tls/ecdsa.h) where tls/paths.h allows it; true:
   * by mbedtls. The same bytes on the wire either way. For tests and
   * benches that compare. */
  bool mbedtls_signatures;
  /* false (the default): an x25519 key exchange is made by libcrypto
   * (tls/kex.h), at either end, where tls/paths.h allows it; true: by
   * mbedtls. The same protocol on the wire either way. For tests and
   * benches that compare. */
  bool mbedtls_kex;
  /* Only this ciphersuite (an mbedtls name, e.g.
   * "TLS-ECDHE-ECDSA-WITH-AES-128-GCM-SHA256", one of those offered by
   * default); NULL: all of them, the server's order. For tests and benches. */
  const char *ciphersuite;
  /* Client only: ask the server for records of at most this many bytes
   * of plaintext (RFC 6066 max_fragment_length: 512, 1024, 2048 or 4096),
   * for peers with little memory; 0: the protocol's 2^14. Either record
   * layer keeps to what was negotiated, both ways. */
  uint32_t max_fragment_len;
} tg_tls_opts_t;

/* Loads and checks every file, seeds the DRBG. On success *out owns the
 * config (free with tg_tls_config_free() after the last session using it
 * is freed). On failure returns TG_EBAD_CONFIG, -ENOMEM or TG_ETLS and
 * writes a NUL-terminated message naming the file and the reason into
 * |err| (|errlen| bytes, may be 0). */
int tg_tls_config_new(const tg_tls_opts_t *opts, tg_tls_config_t **out,
                      char *err, size_t errlen);
void tg_tls_config_free(tg_tls_config_t *cfg);

/* Re-reads the CRL (SIGHUP): from |path|, or the configured crl_file when
 * NULL. Handshakes that verify a certificate from now on use the new list;
 * established sessions are not re-checked and keep working. On failure the
 * old list stays in force and |err| says why (TG_EBAD_CONFIG, -ENOMEM). */
int tg_tls_config_reload_crl(tg_tls_config_t *cfg, const char *path,
                             char *err, size_t errlen);

bool tg_tls_config_is_server(const tg_tls_config_t *cfg);

/* A new session on |cfg| (borrowed; must outlive the session). Clients
 * pass the name the server's certificate must carry, |hostname| (copied;
 * required for clients: it is sent as SNI and matched against the DNS SANs,
 * or the CN when there are none; mbedtls 2.28 does not match IP SANs).
 * |in_max| caps buffered ciphertext input (0: 1 MiB). */
int tg_tls_session_new(tg_tls_config_t *cfg, const char *hostname,
                       size_t in_max, tg_tls_session_t **out);
void tg_tls_session_free(tg_tls_session_t *s);

/* Ciphertext input. Either append with tg_tls_feed() (copies), or write
 * straight into tg_tls_in() with tg_buf_reserve()/tg_buf_commit(); the
 * buffer is owned by the session. Returns 0, -ENOBUFS (over |in_max|) or
 * -ENOMEM. */
int tg_tls_feed(tg_tls_session_t *s, const uint8_t *data, size_t len);
tg_buf_t *tg_tls_in(tg_tls_session_t *s);

/* Ciphertext output waiting to be sent, owned by the session. The caller
 * sends from tg_buf_begin() and tg_buf_consume()s what was sent, or swaps
 * the whole buffer out with tg_tls_swap_out() (zero-copy hand-over to an
 * asynchronous write): *other (empty, possibly with a spare allocation)
 * becomes the session's output buffer and the pending bytes move to it. */
tg_buf_t *tg_tls_out(tg_tls_session_t *s);
void tg_tls_swap_out(tg_tls_session_t *s, tg_buf_t *other);

/* Advances the handshake with the input buffered so far. Returns 0 once it
 * is complete and the peer verified (idempotent afterwards), -EAGAIN when
 * it needs more input (send tg_tls_out() first), or a failure:
 * TG_ETLS_CERT (peer certificate missing, untrusted, expired, revoked,
 * wrong name, no usable identity), TG_ETLS_PEER_ALERT (the peer refused
 * us), TG_ETLS_HANDSHAKE (protocol error, no common cipher), -ENOMEM.
 * After a failure the session is dead: only free it. */
int tg_tls_handshake(tg_tls_session_t *s);

/* Decrypts into |buf| (|cap| > 0 bytes). Returns 0 with *n > 0, -EAGAIN
 * (no complete record buffered), TG_EPEER_CLOSED (close_notify received),
 * TG_ETLS_PEER_ALERT, TG_ETLS (bad record: tampering or not TLS). Call
 * again after 0: more may be buffered. Only after the handshake. */
int tg_tls_read(tg_tls_session_t *s, uint8_t *buf, size_t cap, size_t *n);

/* Encrypts all |len| bytes into records of up to 16 KiB appended to the
 * output buffer. Returns 0, -ENOMEM or TG_ETLS. Only after the handshake. */
int tg_tls_write(tg_tls_session_t *s, const uint8_t *data, size_t len);

/* Whether this CPU has AES and carry-less multiply instructions (x86
 * AES-NI + PCLMUL, arm64 AES + PMULL): then configs whose records go to
 * libcrypto put AES-GCM first. */
bool tg_tls_cpu_has_aes(void);

/* The most plaintext one TLS record carries (RFC 5246 6.2.1). A reader
 * that passes tg_tls_read() at least this much never leaves part of a
 * record to the session. */
#define TG_TLS_RECORD_PLAIN_MAX 16384u

/* Queues a close_notify alert (best effort, for an orderly local close,
 * or in answer to the peer's: then after tg_tls_read() returned
 * TG_EPEER_CLOSED). At most once per session. */
void tg_tls_close_notify(tg_tls_session_t *s);

/* After a successful handshake: the peer certificate's subject CN, else its
 * first DNS SAN, when that is an identity (common/identity.h); NULL when
 * the peer sent no certificate (server without client auth) or it names
 * none. Owned by the session. */
const char *tg_tls_peer_identity(const tg_tls_session_t *s);

/* After a successful handshake: whether it was an abbreviated one,
 * resumed from a ticket (no public-key operation, no certificate chain
 * verified; a server re-checked the client certificate from the ticket
 * against the CRL in force and its dates, and refused it if need be). */
bool tg_tls_session_resumed(const tg_tls_session_t *s);

/* Who carries the records after the handshake: "libcrypto" (handed over,
 * tls/handoff.h), "mbedtls", or "none" before the handshake. */
const char *tg_tls_records(const tg_tls_session_t *s);

/* Whether mbedtls's context of |s| is freed (its traffic keys wiped,
 * its record buffers gone): true once the records are handed over. */
bool tg_tls_mbedtls_released(const tg_tls_session_t *s);

/* Client, before the first tg_tls_handshake(): offers a session saved by
 * tg_tls_session_save() from an earlier connection to the same server
 * (|data_untrusted|, |len| bytes, read here only: a file's bytes are
 * checked by mbedtls's loader, which refuses another build's format).
 * The server may still decline it: then a full handshake happens. Returns
 * 0, -EINVAL (not a usable session: the caller just goes without),
 * -ENOMEM. */
int tg_tls_session_offer(tg_tls_session_t *s, const uint8_t *data_untrusted,
                         size_t len);

/* Client, after a successful handshake: the session, serialised, for
 * tg_tls_session_offer() on a later connection. *out (malloc'd, *len
 * bytes) is the caller's: it holds the session's master secret, so wipe it
 * (mbedtls_platform_zeroize) before freeing. *expires is when the server
 * stops accepting it (Unix seconds: the full handshake's time plus the
 * ticket's lifetime hint, at most a day). Returns 0, -ENOENT (the server
 * issued no ticket), -EINVAL (no completed client handshake), -ENOMEM,
 * TG_ETLS. */
int tg_tls_session_save(const tg_tls_session_t *s, uint8_t **out,
                        size_t *len, uint64_t *expires);

/* SHA-256 of the config's own certificate (over nothing when it has none)
 * and of its CA chain, into caller-provided arrays: what a saved session
 * is tied to, so that another identity or trust never reuses it. */
void tg_tls_config_fingerprints(const tg_tls_config_t *cfg,
                                uint8_t own[TG_TLS_FINGERPRINT_SIZE],
                                uint8_t ca[TG_TLS_FINGERPRINT_SIZE]);

/* Why the last failure happened, for logs: mbedtls's text and raw code,
 * with the certificate verification flags spelt out ("certificate has
 * expired", "revoked", "CN mismatch"...). Empty string if none. Owned by
 * the session, valid until its next call. */
const char *tg_tls_last_error(const tg_tls_session_t *s);

/* The negotiated ciphersuite's mbedtls name ("TLS-ECDHE-ECDSA-WITH-..."),
 * or "none" before the handshake. */
const char *tg_tls_ciphersuite(const tg_tls_session_t *s);

#endif /* TRACEGATE_TLS_SESSION_H */
