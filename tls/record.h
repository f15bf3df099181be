/* tls/record.h: TLS 1.2 AEAD records, sealed and opened with libcrypto.
 *
 * mbedtls 2.28 makes the handshake; this layer then carries the
 * application data, as kTLS does in kernels that have it. The reason is
 * speed: libcrypto's AEADs are an order of magnitude faster than mbedtls
 * 2.28's (whose GHASH takes one block per call; bench_tls_cipher prints
 * both).
 * The records on the wire are the standard ones, so the peer may be any
 * TLS 1.2 implementation, mbedtls's own record layer included.
 *
 *   record = type(1) version(2, 0x0303) length(2) fragment
 *   AES-GCM (RFC 5288):  fragment = explicit_nonce(8) ciphertext tag(16)
 *                        nonce = salt(4, from the key block) || explicit
 *   CHACHA20-POLY1305 (RFC 7905): fragment = ciphertext tag(16)
 *                        nonce = iv(12) XOR (0^4 || seq, big endian)
 *   additional data = seq(8) type(1) version(2) plaintext_length(2)
 *
 * Each direction has its own state (key, IV, 64-bit sequence number);
 * one writer each: the session that owns it. */
#ifndef TRACEGATE_TLS_RECORD_H
#define TRACEGATE_TLS_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_REC_HEADER_SIZE 5
#define TG_REC_TAG_SIZE 16
#define TG_REC_GCM_EXPLICIT_SIZE 8
/* RFC 5246 6.2.1: at most 2^14 bytes of plaintext per record
 * (TG_TLS_RECORD_PLAIN_MAX in tls/session.h, for the callers). */
#define TG_REC_PLAIN_MAX 16384u
/* The largest fragment either cipher makes from TG_REC_PLAIN_MAX. */
#define TG_REC_FRAGMENT_MAX \
  (TG_REC_PLAIN_MAX + TG_REC_GCM_EXPLICIT_SIZE + TG_REC_TAG_SIZE)

enum {
  TG_REC_CHANGE_CIPHER_SPEC = 20,
  TG_REC_ALERT = 21,
  TG_REC_HANDSHAKE = 22,
  TG_REC_APPLICATION_DATA = 23,
};

typedef enum tg_rec_cipher {
  TG_REC_AES_128_GCM,
  TG_REC_AES_256_GCM,
  TG_REC_CHACHA20_POLY1305,
} tg_rec_cipher_t;

typedef struct tg_rec_dir {
  void *ctx; /* EVP_CIPHER_CTX, keyed once */
  tg_rec_cipher_t cipher;
  uint8_t iv[12]; /* GCM: the 4-byte salt first; ChaCha: all 12 */
  uint64_t seq;   /* of the next record */
} tg_rec_dir_t;

/* Key length of |c| in bytes. */
size_t tg_rec_key_len(tg_rec_cipher_t c);
/* Bytes of IV the TLS 1.2 key block holds per direction for |c|: 4 for
 * GCM (the salt), 12 for CHACHA20-POLY1305. */
size_t tg_rec_iv_len(tg_rec_cipher_t c);

/* Keys |d| for one direction: |key| (tg_rec_key_len bytes), |iv|
 * (tg_rec_iv_len bytes), both copied; |seq| is the sequence number of the
 * next record. Returns 0, -EINVAL (lengths) or -ENOMEM. Free with
 * tg_rec_dir_free(), which also wipes the key material. */
int tg_rec_dir_init(tg_rec_dir_t *d, tg_rec_cipher_t c, bool encrypt,
                    const uint8_t *key, size_t key_len, const uint8_t *iv,
                    size_t iv_len, uint64_t seq);
void tg_rec_dir_free(tg_rec_dir_t *d);

/* Size of the record that carries |plain_len| (<= TG_REC_PLAIN_MAX) bytes. */
size_t tg_rec_sealed_size(tg_rec_cipher_t c, size_t plain_len);

/* Seals |len| (<= TG_REC_PLAIN_MAX) bytes of |plain| as one record of
 * |type| into |out| (tg_rec_sealed_size bytes; may not overlap |plain|).
 * Returns 0, -EINVAL, or TG_ETLS when libcrypto fails (the direction is
 * then unusable). */
int tg_rec_seal(tg_rec_dir_t *d, uint8_t type, const uint8_t *plain,
                size_t len, uint8_t *out);

/* What the next record in |in| (|len| bytes, untrusted) needs:
 * 0 when its header is incomplete, else its whole size (header included),
 * which may exceed |len|. TG_ETLS when the header is not a TLS 1.2 record
 * of at most TG_REC_FRAGMENT_MAX bytes. */
int tg_rec_peek(const uint8_t *in, size_t len, size_t *record_size);

/* Size of the plaintext a whole record of |record_size| bytes carries,
 * or -1 when no record of this cipher can have that size. */
long tg_rec_plain_len(tg_rec_cipher_t c, size_t record_size);

/* Opens the whole record at |in| (|record_size| bytes from tg_rec_peek):
 * the plaintext goes to |out| (tg_rec_plain_len bytes; may be |in| +
 * header + explicit nonce, i.e. in place, but no other overlap), its type
 * to *type. Returns 0, or TG_ETLS when the record does not authenticate
 * (wrong key, sequence number, or any byte changed). */
int tg_rec_open(tg_rec_dir_t *d, const uint8_t *in, size_t record_size,
                uint8_t *out, uint8_t *type);

#endif /* TRACEGATE_TLS_RECORD_H */
