/* TLS 1.2 AEAD records with libcrypto's EVP interface (see record.h). */
#include "tls/record.h"

#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "tracegate/error.h"

#define AAD_SIZE 13

_Static_assert(TG_REC_FRAGMENT_MAX <= 0xffff, "record length is 16 bits");

size_t tg_rec_key_len(tg_rec_cipher_t c) {
  return c == TG_REC_AES_128_GCM ? 16 : 32;
}

size_t tg_rec_iv_len(tg_rec_cipher_t c) {
  return c == TG_REC_CHACHA20_POLY1305 ? 12 : 4;
}

static size_t explicit_len(tg_rec_cipher_t c) {
  return c == TG_REC_CHACHA20_POLY1305 ? 0 : TG_REC_GCM_EXPLICIT_SIZE;
}

static const EVP_CIPHER *evp_cipher(tg_rec_cipher_t c) {
  switch (c) {
    case TG_REC_AES_128_GCM: return EVP_aes_128_gcm();
    case TG_REC_AES_256_GCM: return EVP_aes_256_gcm();
    case TG_REC_CHACHA20_POLY1305: return EVP_chacha20_poly1305();
  }
  return NULL;
}

static void put_be64(uint8_t *p, uint64_t v) {
  for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

int tg_rec_dir_init(tg_rec_dir_t *d, tg_rec_cipher_t c, bool encrypt,
                    const uint8_t *key, size_t key_len, const uint8_t *iv,
                    size_t iv_len, uint64_t seq) {
  memset(d, 0, sizeof(*d));
  const EVP_CIPHER *cipher = evp_cipher(c);
  if (!cipher || key_len != tg_rec_key_len(c) || iv_len != tg_rec_iv_len(c))
    return -EINVAL;
  EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
  if (!ctx) return -ENOMEM;
  /* The nonce is set per record; the key schedule is made once here. */
  if (EVP_CipherInit_ex(ctx, cipher, NULL, key, NULL, encrypt ? 1 : 0) != 1) {
    EVP_CIPHER_CTX_free(ctx);
    return -ENOMEM;
  }
  d->ctx = ctx;
  d->cipher = c;
  memcpy(d->iv, iv, iv_len);
  d->seq = seq;
  return 0;
}

void tg_rec_dir_free(tg_rec_dir_t *d) {
  EVP_CIPHER_CTX_free(d->ctx); /* wipes the key schedule */
  OPENSSL_cleanse(d, sizeof(*d));
}

size_t tg_rec_sealed_size(tg_rec_cipher_t c, size_t plain_len) {
  return TG_REC_HEADER_SIZE + explicit_len(c) + plain_len + TG_REC_TAG_SIZE;
}

long tg_rec_plain_len(tg_rec_cipher_t c, size_t record_size) {
  size_t over = TG_REC_HEADER_SIZE + explicit_len(c) + TG_REC_TAG_SIZE;
  if (record_size < over || record_size - over > TG_REC_PLAIN_MAX) return -1;
  return (long)(record_size - over);
}

/* The 12-byte nonce of record |seq|; for GCM |explicit_nonce| is the 8
 * bytes sent in the record. */
static void make_nonce(const tg_rec_dir_t *d, uint64_t seq,
                       const uint8_t *explicit_nonce, uint8_t nonce[12]) {
  if (d->cipher == TG_REC_CHACHA20_POLY1305) {
    uint8_t s[8];
    put_be64(s, seq);
    memcpy(nonce, d->iv, 12);
    for (int i = 0; i < 8; i++) nonce[4 + i] ^= s[i];
  } else {
    memcpy(nonce, d->iv, 4);
    memcpy(nonce + 4, explicit_nonce, 8);
  }
}

static void make_aad(uint8_t aad[AAD_SIZE], uint64_t seq, uint8_t type,
                     size_t plain_len) {
  put_be64(aad, seq);
  aad[8] = type;
  aad[9] = 3;
  aad[10] = 3;
  aad[11] = (uint8_t)(plain_len >> 8);
  aad[12] = (uint8_t)plain_len;
}

int tg_rec_seal(tg_rec_dir_t *d, uint8_t type, const uint8_t *plain,
                size_t len, uint8_t *out) {
  if (!d->ctx || len > TG_REC_PLAIN_MAX || d->seq == UINT64_MAX) return -EINVAL;
  size_t ex = explicit_len(d->cipher);
  size_t frag = ex + len + TG_REC_TAG_SIZE;
  out[0] = type;
  out[1] = 3;
  out[2] = 3;
  out[3] = (uint8_t)(frag >> 8);
  out[4] = (uint8_t)frag;
  uint8_t *explicit_nonce = out + TG_REC_HEADER_SIZE;
  /* The sequence number is unique per key: a sound explicit nonce. */
  if (ex) put_be64(explicit_nonce, d->seq);
  uint8_t nonce[12], aad[AAD_SIZE];
  make_nonce(d, d->seq, explicit_nonce, nonce);
  make_aad(aad, d->seq, type, len);
  EVP_CIPHER_CTX *ctx = d->ctx;
  uint8_t *ct = explicit_nonce + ex;
  int n = 0, fin = 0;
  if (EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, nonce) != 1 ||
      EVP_EncryptUpdate(ctx, NULL, &n, aad, AAD_SIZE) != 1 ||
      EVP_EncryptUpdate(ctx, ct, &n, plain, (int)len) != 1 ||
      EVP_EncryptFinal_ex(ctx, ct + n, &fin) != 1 ||
      (size_t)(n + fin) != len ||
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, TG_REC_TAG_SIZE,
                          ct + len) != 1)
    return TG_ETLS;
  d->seq++;
  return 0;
}

int tg_rec_peek(const uint8_t *in, size_t len, size_t *record_size) {
  *record_size = 0;
  if (len < TG_REC_HEADER_SIZE) return 0;
  size_t frag = (size_t)in[3] << 8 | in[4];
  if (in[1] != 3 || in[2] != 3 || frag > TG_REC_FRAGMENT_MAX) return TG_ETLS;
  *record_size = TG_REC_HEADER_SIZE + frag;
  return 0;
}

int tg_rec_open(tg_rec_dir_t *d, const uint8_t *in, size_t record_size,
                uint8_t *out, uint8_t *type) {
  long plain = tg_rec_plain_len(d->cipher, record_size);
  if (!d->ctx || plain < 0 || d->seq == UINT64_MAX) return TG_ETLS;
  size_t ex = explicit_len(d->cipher);
  const uint8_t *explicit_nonce = in + TG_REC_HEADER_SIZE;
  const uint8_t *ct = explicit_nonce + ex;
  uint8_t nonce[12], aad[AAD_SIZE], tag[TG_REC_TAG_SIZE];
  make_nonce(d, d->seq, explicit_nonce, nonce);
  make_aad(aad, d->seq, in[0], (size_t)plain);
  /* The tag is copied first: opening in place overwrites nothing after
   * the ciphertext, but libcrypto wants it set before Final. */
  memcpy(tag, ct + plain, TG_REC_TAG_SIZE);
  EVP_CIPHER_CTX *ctx = d->ctx;
  int n = 0, fin = 0;
  if (EVP_DecryptInit_ex(ctx, NULL, NULL, NULL, nonce) != 1 ||
      EVP_DecryptUpdate(ctx, NULL, &n, aad, AAD_SIZE) != 1 ||
      EVP_DecryptUpdate(ctx, out, &n, ct, (int)plain) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, TG_REC_TAG_SIZE, tag) != 1 ||
      EVP_DecryptFinal_ex(ctx, out + n, &fin) != 1 || n + fin != plain) {
    /* What was written to |out| is unauthenticated: wipe it. */
    OPENSSL_cleanse(out, (size_t)plain);
    return TG_ETLS;
  }
  *type = in[0];
  d->seq++;
  return 0;
}
