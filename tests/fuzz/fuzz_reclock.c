/* Fuzzes the re-clocking pass (consumer/fleet/reclock.h) with arbitrary
 * files as its input: a merged trace whose hosts' bytes are anyone's.
 * The input is read in pieces of odd sizes, so frames split anywhere.
 *
 * Twice: the pass as the CLI runs it (its fits from whatever requests the
 * input holds), then with a constant correction of every host, so that
 * the rewrite runs on every input. Nothing may crash or read outside the
 * input, and what the rewrite writes holds: every packet of the input that decodes is written as a packet
 * that decodes, in the same place of a file of as many packets; and with
 * no host moved, it is the input byte for byte.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "consumer/fleet/reclock.h"
#include "tracegate/pb_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HOSTS 4

/* Whether |p| is a message that decodes whole (its fields only). */
static bool decodes(const uint8_t *p, size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  tg_pb_reader_init(&r, p, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
  }
  return rv == 0;
}

/* The input and the output side by side, when the input is a Trace
 * whose fields all decode: as many top-level fields, a packet that
 * decoded still decodes. */
static void check(const uint8_t *in, size_t n, const tg_buf_t *out, bool moved) {
  if (!moved && (tg_buf_size(out) != n || memcmp(tg_buf_begin(out), in, n)))
    __builtin_trap();
  tg_pb_reader_t ri, ro;
  tg_pb_field_t fi, fo;
  tg_pb_reader_init(&ri, in, n);
  tg_pb_reader_init(&ro, tg_buf_begin(out), tg_buf_size(out));
  int a, b;
  while ((a = tg_pb_reader_next(&ri, &fi)) == 1) {
    b = tg_pb_reader_next(&ro, &fo);
    if (b != 1 || fo.id != fi.id || fo.type != fi.type) __builtin_trap();
    if (fi.id == 1 && fi.type == TG_PB_WT_LEN && decodes(fi.data, fi.size) &&
        !decodes(fo.data, fo.size))
      __builtin_trap();
  }
  if (a == 0 && tg_pb_reader_next(&ro, &fo) != 0) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_reclock_mem_t m;
  tg_reclock_io_t io = tg_reclock_mem_io(&m, data, size, 1 + size % 61);
  tg_reclock_host_t h[HOSTS];
  memset(h, 0, sizeof(h));
  h[0].bound_ns = 50000;
  tg_reclock_stats_t st;
  if (tg_reclock_run(&io, h, HOSTS, &st) == 0 && st.rewritten)
    check(data, size, &m.out, st.hosts_moved > 0);
  if (st.hosts_moved > HOSTS - 1) __builtin_trap();

  m.at = 0;
  memset(&st, 0, sizeof(st));
  tg_reclock_t *rc = tg_reclock_new(HOSTS);
  if (rc && tg_reclock_scan(rc, &io, &st) == 0) {
    for (size_t k = 0; k < HOSTS; k++)
      tg_reclock_set_constant(rc, k, (int64_t)(k * 1000) - 1500);
    if (tg_reclock_place(rc, h, &st) == HOSTS &&
        tg_reclock_rewrite(rc, &io, h, &st) == 0)
      check(data, size, &m.out, true);
  }
  tg_reclock_free(rc);
  tg_reclock_mem_free(&m);
  return 0;
}
