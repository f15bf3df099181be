/* Fuzzes Perfetto's packet filter (service/trace_filter.h): the bytecode
 * parser on untrusted configs, and the message filter on untrusted
 * packets through it.
 *
 * Input: [n: 1 byte][n words of 3 bytes, little endian][mode: 1 byte]
 * [cut a][cut b][packet...]. Mode bit 0: the words go in with a wrong
 * checksum (the parser must refuse them); otherwise with the right one,
 * so that the parser's checks past the checksum are reached. The packet is
 * given in three slices cut at a and b.
 *
 * Invariants (trap on violation):
 * - a bytecode that loads answers every query, and filters any packet to
 *   an output no larger than the packet, or refuses it with -EINVAL;
 * - a wrong checksum never loads;
 * - a filter that accepts every field is a fixed point on its own output
 *   (what is already in its shortest encoding comes back unchanged), and
 *   how the packet is sliced does not change any output: one byte a slice
 *   (the byte-at-a-time path alone) gives what whole fields give.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "service/trace_filter.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/service/filter_bytecode_gen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_WORDS 64
#define MAX_BYTE_SLICES 2048

static tg_trace_filter_t *accept_all(void) {
  static tg_trace_filter_t *f;
  if (f) return f;
  const uint32_t w[] = {FBC_WORD(1, FBC_RANGE), (1u << 29) - 2, FBC_WORD(0, FBC_EOM)};
  uint8_t code[64];
  tg_filter_bytecode_t bc;
  if (tg_filter_bytecode_load(&bc, code, fbc_encode(w, 3, code), NULL, 0, NULL, 0) ||
      tg_trace_filter_new(&f, &bc, NULL, NULL, 0, NULL, 0))
    __builtin_trap();
  return f;
}

/* Runs |f| on |p| whole and in three slices: both must agree. */
static long run_both(tg_trace_filter_t *f, const uint8_t *p, size_t n, size_t a,
                     size_t b, uint8_t **copy) {
  const uint8_t *out;
  const uint8_t *s1[1] = {p};
  size_t l1[1] = {n};
  long len = tg_trace_filter_run(f, s1, l1, 1, &out);
  if (len < 0 && len != -EINVAL && len != -ENOMEM) __builtin_trap();
  if (len > (long)n) __builtin_trap();
  *copy = NULL;
  if (len >= 0) {
    *copy = malloc((size_t)len + 1);
    if (!*copy) abort();
    memcpy(*copy, out, (size_t)len);
  }
  if (a > n) a = n;
  if (b > n - a) b = n - a;
  const uint8_t *s3[3] = {p, p + a, p + a + b};
  size_t l3[3] = {a, b, n - a - b};
  long len3 = tg_trace_filter_run(f, s3, l3, 3, &out);
  if (len3 != len) __builtin_trap();
  if (len > 0 && memcmp(out, *copy, (size_t)len)) __builtin_trap();
  /* One byte a slice: the byte path alone, against the whole-field one. */
  if (n <= MAX_BYTE_SLICES) {
    static const uint8_t *sb[MAX_BYTE_SLICES];
    static size_t lb[MAX_BYTE_SLICES];
    for (size_t i = 0; i < n; i++) {
      sb[i] = p + i;
      lb[i] = 1;
    }
    long lenb = tg_trace_filter_run(f, sb, lb, (unsigned)n, &out);
    if (lenb != len) __builtin_trap();
    if (len > 0 && memcmp(out, *copy, (size_t)len)) __builtin_trap();
  }
  return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input_t in = {data, size};
  size_t n = take(&in) % (MAX_WORDS + 1);
  uint32_t w[MAX_WORDS];
  for (size_t i = 0; i < n; i++) w[i] = take_le(&in, 3);
  uint8_t mode = take(&in);
  size_t a = take(&in), b = take(&in);
  const uint8_t *pkt = in.p;
  size_t pkt_len = in.left;

  uint8_t code[5 * (MAX_WORDS + 1)];
  size_t code_len = fbc_encode(w, n, code);
  if (mode & 1) code[code_len - 1] ^= 0x01; /* the checksum's last byte */
  tg_filter_bytecode_t bc;
  char why[256];
  int rv = tg_filter_bytecode_load(&bc, code, code_len, NULL, 0, why, sizeof(why));
  if ((mode & 1) && rv == 0) __builtin_trap();
  if (rv == 0) {
    for (uint32_t m = 0; m <= bc.n_messages; m++)
      for (uint32_t id = 0; id < 140; id += 7) (void)tg_filter_bytecode_query(&bc, m, id);
    tg_trace_filter_t *f;
    if (tg_trace_filter_new(&f, &bc, NULL, NULL, 0, why, sizeof(why)) == 0) {
      uint8_t *copy;
      run_both(f, pkt, pkt_len, a, b, &copy);
      free(copy);
      tg_trace_filter_free(f);
    }
  } else if (rv != -EINVAL && rv != -ENOMEM) {
    __builtin_trap();
  }

  uint8_t *once, *twice;
  long l1 = run_both(accept_all(), pkt, pkt_len, a, b, &once);
  if (l1 > 0) {
    long l2 = run_both(accept_all(), once, (size_t)l1, a, b, &twice);
    if (l2 != l1 || memcmp(once, twice, (size_t)l1)) __builtin_trap();
    free(twice);
  }
  free(once);
  return 0;
}
