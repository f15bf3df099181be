/* Fuzzes the record reader that carries a TLS 1.2 session once mbedtls has
 * made its handshake (tls/handoff.c, tg_tls_handoff_read, over the
 * records of tls/record.c): every byte a peer sends after the handshake
 * goes through it, and it must parse a record header before anything
 * authenticates it.
 *
 * There is no handshake here: both directions are keyed by hand with one
 * constant key and IV at sequence number 0 (tg_tls_handoff_start needs an
 * mbedtls session), so the harness's own writer seals records that the
 * reader must open.
 *
 * Input: [ctl][seed lo][seed hi], then what the mode takes.
 *   ctl bits 0-1: cipher, % 3: AES-128-GCM, AES-256-GCM, CHACHA20-POLY1305
 *   ctl bit 2:    mode A (0) or mode B (1)
 *   ctl bit 3:    the reader's input arrives in pieces (partial records)
 *                 instead of all at once in an exact-size buffer
 *   ctl bits 4-5: mode B's damage: 1 flips a byte, 2 truncates, else none
 *   ctl bit 6:    a negotiated max_fragment_length of 512 both ways
 *                 instead of 2^14
 *   seed:         a xorshift for the read caps (1..1 + seed % 20000) and
 *                 the piece sizes
 * Mode A: the rest is hostile ciphertext, read until the reader stops.
 * Mode B: [pos, u24 LE][xor], then a script of writes, each [u16 LE v]:
 *   v = 0:       one record made by tg_rec_seal: [type][len][len bytes]
 *   v < 0x8000:  tg_tls_handoff_write of v literal bytes (those left)
 *   v = 0x8000:  tg_tls_handoff_alert: [level][desc]
 *   v > 0x8000:  tg_tls_handoff_write of v & 0x7FFF bytes made from one
 *                [byte] (more than TG_REC_PLAIN_MAX takes two records)
 * sealed into a wire buffer, damaged at pos % its size (xor 0 counts as
 * 1; truncation cuts there), then read back.
 *
 * Invariants (trap on violation):
 * - *n <= cap, *n > 0 exactly when the read returns 0, the status is one
 *   the header documents, and the reads are bounded in number;
 * - TG_ETLS leaves exactly one record in |out|: a fatal alert that opens
 *   with the key; any other status leaves |out| as it was;
 * - mode B: the plaintext read back is byte for byte what was written up
 *   to the first damaged, cut or closing record, and the status is the one
 *   that record calls for: damage TG_ETLS (or -EAGAIN when a length byte
 *   grew past the end), a cut -EAGAIN with the partial record left unread,
 *   close_notify TG_EPEER_CLOSED, a fatal alert TG_ETLS_PEER_ALERT, a
 *   record of another type or a malformed alert TG_ETLS, and so the
 *   fourth empty record or the sixth warning alert in a row. Never wrong
 *   plaintext; no written record over the negotiated size.
 * Every read's buffer of |cap| bytes ends where its heap block ends, so
 * ASan catches a write past the cap.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "tls/handoff.h"
#include "tls/record.h"
#include "tracegate/error.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAP_MAX 20000u
#define IN_MAX ((size_t)1 << 20)       /* the reader's input, in pieces */
#define WIRE_MAX ((size_t)4 << 20)     /* what mode B seals */
#define PLAIN_LIMIT ((size_t)64 << 10) /* mode B's plaintext: 4 records */
#define MAX_OPS 4096u

/* A record's part in mode B's expectations; other values are the status
 * the reader must stop with there. */
#define REC_DATA 1
#define REC_SKIPPED 2

static const uint8_t kKey[32] = {
    0x4b, 0x65, 0x79, 0x20, 0x6f, 0x66, 0x20, 0x66, 0x75, 0x7a, 0x7a,
    0x5f, 0x74, 0x6c, 0x73, 0x5f, 0x72, 0x65, 0x63, 0x6f, 0x72, 0x64,
    0x2e, 0x63, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77};
static const uint8_t kIv[12] = {0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5,
                                0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab};

/* The reader under test, its input and its caps. */
typedef struct reader {
  tg_tls_handoff_t *h;
  tg_buf_t in, out;
  const uint8_t *src; /* everything the peer sends */
  size_t src_len, fed;
  bool pieces;
  uint32_t rng;
  uint32_t cap_max;
} reader_t;

static uint32_t next_rng(reader_t *r) {
  uint32_t x = r->rng;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return r->rng = x;
}

/* Hands the reader the next piece of |src|; false when all of it is in. */
static bool feed(reader_t *r) {
  if (r->fed == r->src_len) return false;
  size_t k = r->src_len - r->fed;
  if (r->pieces) {
    size_t piece = 1 + next_rng(r) % r->cap_max;
    if (piece < k) k = piece;
  }
  int rv = tg_buf_append(&r->in, r->src + r->fed, k);
  if (rv == -ENOMEM) return false;
  /* Pieces are only fed to a reader short of one record. */
  if (rv != 0) __builtin_trap();
  r->fed += k;
  return true;
}

static void reader_init(reader_t *r, tg_tls_handoff_t *h, uint8_t ctl,
                        uint16_t seed, const uint8_t *src, size_t len) {
  memset(r, 0, sizeof(*r));
  r->h = h;
  r->src = src;
  r->src_len = len;
  r->pieces = ctl & 8;
  r->cap_max = 1 + seed % CAP_MAX;
  r->rng = ((uint32_t)seed << 8) ^ 0x9e3779b9u;
  /* At once: a cap of exactly |len| makes tg_buf allocate exactly |len|
   * bytes, so ASan sees a read past the last one. */
  tg_buf_init(&r->in, r->pieces ? IN_MAX : len);
  tg_buf_init(&r->out, 0);
  feed(r);
}

static void reader_free(reader_t *r) {
  tg_buf_free(&r->in);
  tg_buf_free(&r->out);
}

/* |out| after TG_ETLS: one fatal alert the reader just sealed with h->out,
 * which a reader with the same key (both directions share it) opens. */
static void check_alert(const reader_t *r, size_t out_before) {
  tg_rec_cipher_t c = r->h->out.cipher;
  size_t len = tg_buf_size(&r->out) - out_before, size = 0;
  const uint8_t *rec = tg_buf_begin(&r->out) + out_before;
  if (len != tg_rec_sealed_size(c, 2)) __builtin_trap();
  if (tg_rec_peek(rec, len, &size) != 0 || size != len) __builtin_trap();
  if (r->h->out.seq == 0) __builtin_trap();
  tg_rec_dir_t peer;
  if (tg_rec_dir_init(&peer, c, false, kKey, tg_rec_key_len(c), kIv,
                      tg_rec_iv_len(c), r->h->out.seq - 1) != 0) {
    tg_rec_dir_free(&peer);
    return; /* -ENOMEM */
  }
  uint8_t body[2], type = 0;
  if (tg_rec_open(&peer, rec, len, body, &type) != 0) __builtin_trap();
  tg_rec_dir_free(&peer);
  if (type != TG_REC_ALERT || body[0] != 2) __builtin_trap();
  /* unexpected_message, bad_record_mac, record_overflow, decode_error */
  if (body[1] != 10 && body[1] != 20 && body[1] != 22 && body[1] != 50)
    __builtin_trap();
}

/* Reads until the reader stops: its last status (-EAGAIN once all of
 * |src| is in). The plaintext must be a prefix of |expect| (|expect_len|
 * bytes) when given; *got counts it. */
static int run_reader(reader_t *r, const uint8_t *expect, size_t expect_len,
                      size_t *got) {
  *got = 0;
  /* A 0 gives >= 1 byte of plaintext, which takes a record of more bytes
   * than that; an -EAGAIN is followed by >= 1 more byte of input. */
  size_t max_reads = 2 * r->src_len + 2;
  uint8_t *area = malloc(r->cap_max);
  if (!area) return -ENOMEM;
  int rv;
  for (size_t reads = 0;; reads++) {
    if (reads > max_reads) __builtin_trap();
    size_t cap = 1 + next_rng(r) % r->cap_max;
    uint8_t *buf = area + (r->cap_max - cap);
    size_t n = SIZE_MAX, out_before = tg_buf_size(&r->out);
    char why[128] = "";
    rv = tg_tls_handoff_read(r->h, &r->in, &r->out, buf, cap, &n, why,
                             sizeof(why));
    if (n > cap || (rv == 0) != (n > 0)) __builtin_trap();
    if (rv == 0) {
      if (expect) {
        if (n > expect_len - *got || memcmp(buf, expect + *got, n) != 0)
          __builtin_trap();
      } else {
        volatile uint8_t x = 0;
        for (size_t i = 0; i < n; i++) x ^= buf[i];
        (void)x;
      }
      *got += n;
    }
    if (rv == TG_ETLS) {
      if (!why[0]) __builtin_trap();
      check_alert(r, out_before);
      break;
    }
    if (tg_buf_size(&r->out) != out_before) __builtin_trap();
    if (rv == 0 || (rv == -EAGAIN && feed(r))) continue;
    if (rv == TG_EPEER_CLOSED || rv == TG_ETLS_PEER_ALERT) {
      if (!why[0]) __builtin_trap();
    } else if (rv != -EAGAIN && rv != -ENOMEM) {
      __builtin_trap();
    }
    break;
  }
  free(area);
  return rv;
}

static void mode_a(tg_tls_handoff_t *h, uint8_t ctl, uint16_t seed,
                   const input_t *in) {
  reader_t r;
  reader_init(&r, h, ctl, seed, in->p, in->left);
  size_t got = 0;
  run_reader(&r, NULL, 0, &got);
  if (got > in->left) __builtin_trap();
  reader_free(&r);
}

typedef struct rec {
  size_t end;   /* in the wire, past the record */
  size_t plain; /* application data bytes it carries */
  int part;     /* REC_DATA, REC_SKIPPED, or the status it ends with */
} rec_t;

/* What the reader must make of an authentic record. */
static int part_of(uint8_t type, const uint8_t *body, size_t len) {
  if (type == TG_REC_APPLICATION_DATA) return REC_DATA;
  if (type != TG_REC_ALERT || len != 2) return TG_ETLS;
  if (body[1] == 0) return TG_EPEER_CLOSED;
  return body[0] == 1 ? REC_SKIPPED : TG_ETLS_PEER_ALERT;
}

typedef struct script {
  tg_tls_handoff_t *h;
  tg_buf_t wire;
  uint8_t *plain; /* the application data written, in order */
  size_t plain_len;
  rec_t *recs;
  size_t nrecs, max_recs;
} script_t;

static void add_rec(script_t *s, size_t size, size_t plain, int part) {
  if (s->nrecs == s->max_recs) __builtin_trap();
  size_t start = s->nrecs ? s->recs[s->nrecs - 1].end : 0;
  s->recs[s->nrecs++] = (rec_t){start + size, plain, part};
}

/* One op of the script; false when the script must stop. */
static bool run_op(script_t *s, input_t *in) {
  tg_rec_cipher_t c = s->h->out.cipher;
  size_t before = tg_buf_size(&s->wire);
  uint16_t v = (uint16_t)take_le(in, 2);
  int rv;
  if (v == 0) {
    uint8_t type = take(in), body[255];
    size_t len = take(in);
    if (len > in->left) len = in->left;
    memcpy(body, in->p, len);
    in->p += len;
    in->left -= len;
    int part = part_of(type, body, len);
    if (part == REC_DATA && len > PLAIN_LIMIT - s->plain_len) return false;
    size_t size = tg_rec_sealed_size(c, len);
    uint8_t *p = tg_buf_reserve(&s->wire, size);
    if (!p) return false;
    if (tg_rec_seal(&s->h->out, type, body, len, p) != 0) __builtin_trap();
    tg_buf_commit(&s->wire, size);
    add_rec(s, size, part == REC_DATA ? len : 0, part);
    if (part == REC_DATA) {
      memcpy(s->plain + s->plain_len, body, len);
      s->plain_len += len;
    }
    return true;
  }
  if (v == 0x8000) {
    uint8_t b[2];
    b[0] = take(in);
    b[1] = take(in);
    rv = tg_tls_handoff_alert(s->h, &s->wire, b[0], b[1]);
    if (rv == 0) {
      size_t size = tg_rec_sealed_size(c, 2);
      if (tg_buf_size(&s->wire) - before != size) __builtin_trap();
      add_rec(s, size, 0, part_of(TG_REC_ALERT, b, 2));
      return true;
    }
  } else {
    size_t n;
    const uint8_t *src;
    uint8_t *fill = NULL;
    if (v & 0x8000) {
      n = v & 0x7FFF;
      uint8_t b = take(in);
      if (n > PLAIN_LIMIT - s->plain_len) n = PLAIN_LIMIT - s->plain_len;
      /* An exact-size copy, so ASan sees a read past the plaintext. */
      if (!(fill = malloc(n ? n : 1))) return false;
      for (size_t i = 0; i < n; i++) fill[i] = (uint8_t)(b + i);
      src = fill;
    } else {
      n = v < in->left ? v : in->left;
      if (n > PLAIN_LIMIT - s->plain_len) n = PLAIN_LIMIT - s->plain_len;
      src = in->p; /* the fuzzer's own exact-size input */
      in->p += n;
      in->left -= n;
    }
    if (n == 0) {
      free(fill);
      return s->plain_len < PLAIN_LIMIT;
    }
    rv = tg_tls_handoff_write(s->h, &s->wire, src, n);
    if (rv == 0) {
      size_t total = 0, max = s->h->out_max;
      for (size_t off = 0; off < n; off += max) {
        size_t k = n - off < max ? n - off : max;
        add_rec(s, tg_rec_sealed_size(c, k), k, REC_DATA);
        total += tg_rec_sealed_size(c, k);
      }
      if (tg_buf_size(&s->wire) - before != total) __builtin_trap();
      memcpy(s->plain + s->plain_len, src, n);
      s->plain_len += n;
    }
    free(fill);
    if (rv == 0) return true;
  }
  /* The wire's cap or memory: nothing may have been added. */
  if (rv != -ENOMEM && rv != -ENOBUFS) __builtin_trap();
  if (tg_buf_size(&s->wire) != before) __builtin_trap();
  return false;
}

enum { DAMAGE_NONE, DAMAGE_FLIP, DAMAGE_CUT };

static void mode_b(tg_tls_handoff_t *h, uint8_t ctl, uint16_t seed,
                   input_t *in) {
  uint32_t pos = take_le(in, 3);
  uint8_t x = take(in);
  if (x == 0) x = 1;
  int damage = (ctl >> 4) & 3;
  if (damage == 3) damage = DAMAGE_NONE;

  script_t s = {.h = h};
  size_t max_ops = in->left < MAX_OPS ? in->left + 1 : MAX_OPS;
  /* A record per op, and a write's plaintext split at out_max besides. */
  s.max_recs = 2 * max_ops + PLAIN_LIMIT / h->out_max;
  s.recs = malloc(s.max_recs * sizeof(*s.recs));
  s.plain = malloc(PLAIN_LIMIT);
  tg_buf_init(&s.wire, WIRE_MAX);
  if (!s.recs || !s.plain) goto out;
  for (size_t ops = 0; in->left && ops < max_ops; ops++)
    if (!run_op(&s, in)) break;

  /* The damage. */
  size_t wire_len = tg_buf_size(&s.wire), len = wire_len;
  if (wire_len == 0) damage = DAMAGE_NONE;
  if (damage == DAMAGE_FLIP) tg_buf_begin(&s.wire)[pos % wire_len] ^= x;
  if (damage == DAMAGE_CUT) len = pos % wire_len;
  size_t flip = damage == DAMAGE_FLIP ? pos % wire_len : SIZE_MAX;

  /* What the reader must make of it. */
  size_t want_plain = 0, want_left = 0;
  unsigned empty_run = 0, warning_run = 0;
  int want = -EAGAIN;
  bool eagain_too = false; /* a length byte flipped: may ask for more */
  for (size_t i = 0; i < s.nrecs; i++) {
    const rec_t *rec = &s.recs[i];
    size_t start = i ? s.recs[i - 1].end : 0;
    if (flip >= start && flip < rec->end) {
      want = TG_ETLS;
      eagain_too = flip == start + 3 || flip == start + 4;
      want_left = len - start;
      break;
    }
    if (rec->end > len) {
      want_left = len - start; /* a cut record: -EAGAIN, left unread */
      break;
    }
    if (rec->part != REC_DATA && rec->part != REC_SKIPPED) {
      want = rec->part;
      break;
    }
    /* What a peer may send in a row that carries nothing. */
    if (rec->part == REC_SKIPPED && ++warning_run > 5) {
      want = TG_ETLS;
      break;
    }
    if (rec->part == REC_DATA && rec->plain == 0 && ++empty_run > 3) {
      want = TG_ETLS;
      break;
    }
    if (rec->part == REC_DATA && rec->plain > 0) empty_run = warning_run = 0;
    want_plain += rec->plain;
  }

  reader_t r;
  reader_init(&r, h, ctl, seed, len ? tg_buf_begin(&s.wire) : NULL, len);
  size_t got = 0;
  int rv = run_reader(&r, s.plain, want_plain, &got);
  if (rv != -ENOMEM) {
    if (got != want_plain) __builtin_trap();
    if (rv != want && !(eagain_too && rv == -EAGAIN)) __builtin_trap();
    if (rv == -EAGAIN && tg_buf_size(&r.in) != want_left) __builtin_trap();
  }
  reader_free(&r);
out:
  tg_buf_free(&s.wire);
  free(s.plain);
  free(s.recs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input_t in = {data, size};
  uint8_t ctl = take(&in);
  uint16_t seed = (uint16_t)take_le(&in, 2);
  static const tg_rec_cipher_t ciphers[3] = {
      TG_REC_AES_128_GCM, TG_REC_AES_256_GCM, TG_REC_CHACHA20_POLY1305};
  tg_rec_cipher_t c = ciphers[(ctl & 3) % 3];

  /* What tg_tls_handoff_start would leave, with one key both ways. */
  tg_tls_handoff_t h;
  memset(&h, 0, sizeof(h));
  h.started = true; /* tg_tls_handoff_clear frees both directions */
  h.in_max = h.out_max = ctl & 64 ? 512 : TG_REC_PLAIN_MAX;
  int rv = tg_rec_dir_init(&h.out, c, true, kKey, tg_rec_key_len(c), kIv,
                           tg_rec_iv_len(c), 0);
  if (rv == 0)
    rv = tg_rec_dir_init(&h.in, c, false, kKey, tg_rec_key_len(c), kIv,
                         tg_rec_iv_len(c), 0);
  if (rv != 0 && rv != -ENOMEM) __builtin_trap();
  if (rv == 0) {
    if (ctl & 4)
      mode_b(&h, ctl, seed, &in);
    else
      mode_a(&h, ctl, seed, &in);
  }
  tg_tls_handoff_clear(&h);
  return 0;
}
