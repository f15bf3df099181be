/* The CLI's trace file (cli/output.c): counting the packets that a
 * service writes into it (write_into_file), which the CLI scans for its
 * progress line and checks before it names the file; and the packets the
 * CLI writes itself, every one whole and in order.
 *
 * The bytes are written here as the service would, straight into the
 * output's fd; the scan must count whole packets only, read on as more
 * arrive, and treat a length from the file as untrusted.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_proc.h"
#include "tracegate/pb_wire.h"
#include "cli/cli.h"
#include "tracegate/error.h"

typedef struct fixture {
  char dir[64];
  char path[128];
  cli_output_t o;
} fixture_t;

static int setup(void **state) {
  fixture_t *fx = calloc(1, sizeof(*fx));
  assert_non_null(fx);
  assert_int_equal(tg_test_mkdtemp(fx->dir, sizeof(fx->dir), "cli-output"), 0);
  snprintf(fx->path, sizeof(fx->path), "%s/trace.pftrace", fx->dir);
  assert_int_equal(cli_output_open(&fx->o, fx->path), 0);
  fx->o.by_service = true;
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture_t *fx = *state;
  cli_output_discard(&fx->o);
  int rv = tg_test_rm_rf(fx->dir);
  free(fx);
  return rv == 0 ? 0 : -1;
}

static void write_bytes(fixture_t *fx, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fx->o.fd, p, n);
    assert_true(w > 0);
    p += w;
    n -= (size_t)w;
  }
}

/* A Trace.packet field of |len| bytes of filler. Returns its size. */
static size_t write_packet(fixture_t *fx, size_t len) {
  uint8_t hdr[1 + TG_PB_MAX_VARINT_SIZE];
  hdr[0] = TG_PB_TAG(1, TG_PB_WT_LEN);
  size_t h = (size_t)(tg_pb_write_varint(hdr + 1, len) - hdr);
  uint8_t *body = malloc(len ? len : 1);
  assert_non_null(body);
  memset(body, 0x5A, len);
  write_bytes(fx, hdr, h);
  write_bytes(fx, body, len);
  free(body);
  return h + len;
}

/* Many small packets (their headers straddle every read block) and a few
 * larger than a block, jumped over. */
static void scan_counts_packets_across_blocks(void **state) {
  fixture_t *fx = *state;
  uint64_t total = 0, count = 0;
  for (size_t i = 0; i < 3000; i++, count++)
    total += write_packet(fx, i % 300);
  total += write_packet(fx, 70000);
  total += write_packet(fx, 16 * 1024);
  count += 2;
  for (size_t i = 0; i < 500; i++, count++) total += write_packet(fx, 127 + i % 3);
  assert_int_equal(cli_output_scan(&fx->o), 0);
  assert_int_equal(fx->o.packets, count);
  assert_int_equal(fx->o.scan_off, total);
  assert_int_equal(fx->o.bytes, total);
  /* Scanning again finds nothing new. */
  assert_int_equal(cli_output_scan(&fx->o), 0);
  assert_int_equal(fx->o.packets, count);
}

/* A packet still being written is not counted until it is whole; the scan
 * resumes where it stopped. */
static void scan_waits_for_a_packet_being_written(void **state) {
  fixture_t *fx = *state;
  uint64_t whole = write_packet(fx, 10) + write_packet(fx, 200);
  /* A header cut after its tag and one length byte of two. */
  const uint8_t head[] = {TG_PB_TAG(1, TG_PB_WT_LEN), 0x90};
  write_bytes(fx, head, sizeof(head));
  assert_int_equal(cli_output_scan(&fx->o), 0);
  assert_int_equal(fx->o.packets, 2);
  assert_int_equal(fx->o.scan_off, whole);
  /* The rest of the header (length 0x10 | 1 << 7 = 144), half the body. */
  const uint8_t rest[] = {0x01};
  write_bytes(fx, rest, sizeof(rest));
  uint8_t body[144];
  memset(body, 1, sizeof(body));
  write_bytes(fx, body, 100);
  assert_int_equal(cli_output_scan(&fx->o), 0);
  assert_int_equal(fx->o.packets, 2);
  assert_int_equal(fx->o.scan_off, whole);
  write_bytes(fx, body, 44);
  assert_int_equal(cli_output_scan(&fx->o), 0);
  assert_int_equal(fx->o.packets, 3);
  assert_int_equal(fx->o.scan_off, whole + 3 + 144);
  assert_int_equal(fx->o.bytes, whole + 3 + 144);
}

/* A length near 2^64 must not wrap the scan back onto itself (it used to
 * loop for ever): it is a packet that has not arrived yet, and the file
 * fails the final check. */
static void scan_survives_a_length_past_the_end(void **state) {
  fixture_t *fx = *state;
  uint64_t whole = write_packet(fx, 5);
  uint8_t hdr[1 + TG_PB_MAX_VARINT_SIZE];
  hdr[0] = TG_PB_TAG(1, TG_PB_WT_LEN);
  /* 1 + 10 + len wraps to 0. */
  size_t h = (size_t)(tg_pb_write_varint(hdr + 1, UINT64_MAX - 10) - hdr);
  assert_int_equal(h, 11);
  write_bytes(fx, hdr, h);
  uint8_t tail[64] = {0};
  write_bytes(fx, tail, sizeof(tail));
  assert_int_equal(cli_output_scan(&fx->o), 0);
  assert_int_equal(fx->o.packets, 1);
  assert_int_equal(fx->o.scan_off, whole);
  assert_int_equal(cli_output_commit(&fx->o), -1);
}

static void scan_rejects_what_is_not_packets(void **state) {
  fixture_t *fx = *state;
  write_packet(fx, 3);
  const uint8_t junk[] = {0x12, 0x01, 0x00};
  write_bytes(fx, junk, sizeof(junk));
  assert_int_equal(cli_output_scan(&fx->o), TG_EPROTO_DECODE);
  assert_int_equal(fx->o.packets, 1);
}

/* Ten continuation bytes: not a varint, whatever follows. */
static void scan_rejects_an_overlong_length(void **state) {
  fixture_t *fx = *state;
  uint8_t bad[12];
  bad[0] = TG_PB_TAG(1, TG_PB_WT_LEN);
  memset(bad + 1, 0xFF, 11);
  write_bytes(fx, bad, sizeof(bad));
  assert_int_equal(cli_output_scan(&fx->o), TG_EPROTO_DECODE);
  assert_int_equal(fx->o.packets, 0);
}

/* The CLI's own writes into a regular file leave the page cache alone:
 * direct (common/direct_write.h) from the first flush on where the file
 * system takes O_DIRECT, else through the write-behind helper
 * (common/write_behind.h), whose step of packets starts their write-back.
 * A FIFO has no pages: there both are off. */
static void own_writes_go_direct_or_behind(void **state) {
  fixture_t *fx = *state;
  fx->o.by_service = false;
  assert_true(tg_write_behind_active(&fx->o.wb));
  static uint8_t body[1000];
  size_t step = TG_WRITE_BEHIND_STEP;
  while (fx->o.bytes <= step + (1u << 20))
    assert_int_equal(cli_output_packet(&fx->o, body, sizeof(body)), 0);
  if (!fx->o.dw) {
    assert_true(tg_write_behind_active(&fx->o.wb));
    assert_true(fx->o.wb.started >= step);
    assert_true(fx->o.wb.started <= fx->o.wb.end);
  } else {
    assert_int_equal(fx->o.wb.started, 0); /* the cache saw none of it */
  }

  char fifo[160];
  snprintf(fifo, sizeof(fifo), "%s/fifo", fx->dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  int reader = open(fifo, O_RDONLY | O_NONBLOCK); /* so the open below won't block */
  assert_true(reader >= 0);
  cli_output_t piped;
  assert_int_equal(cli_output_open(&piped, fifo), 0);
  assert_false(tg_write_behind_active(&piped.wb));
  cli_output_discard(&piped);
  close(reader);
}

/* Packets of every size, the first one larger than the output's buffer
 * (the flush it causes starts the direct writer): each packet in the
 * file whole, once, in order. */
static void own_packets_in_order_whatever_their_size(void **state) {
  fixture_t *fx = *state;
  fx->o.by_service = false;
  static const size_t sizes[] = {300000, 5, 70000, 1, 262144, 4000, 999999};
  uint8_t *body = malloc(1000000);
  assert_non_null(body);
  uint32_t n = 0;
  /* Past two direct blocks, so blocks go while packets keep coming. */
  while (fx->o.bytes < (10u << 20)) {
    size_t len = sizes[n % (sizeof(sizes) / sizeof(sizes[0]))];
    memset(body, (int)(n & 0xff), len);
    memcpy(body, &n, len < 4 ? len : 4);
    assert_int_equal(cli_output_packet(&fx->o, body, len), 0);
    n++;
  }
  uint64_t bytes = fx->o.bytes;
  assert_int_equal(cli_output_commit(&fx->o), 0);

  int fd = open(fx->path, O_RDONLY);
  assert_true(fd >= 0);
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  assert_int_equal((uint64_t)st.st_size, bytes);
  uint8_t *file = malloc((size_t)st.st_size);
  assert_non_null(file);
  size_t got = 0;
  while (got < (size_t)st.st_size) {
    ssize_t r = read(fd, file + got, (size_t)st.st_size - got);
    assert_true(r > 0);
    got += (size_t)r;
  }
  close(fd);
  tg_pb_reader_t rd;
  tg_pb_reader_init(&rd, file, got);
  tg_pb_field_t f;
  uint32_t k = 0;
  int rv;
  while ((rv = tg_pb_reader_next(&rd, &f)) == 1) {
    assert_int_equal(f.id, 1);
    size_t len = sizes[k % (sizeof(sizes) / sizeof(sizes[0]))];
    assert_int_equal(f.size, len);
    memset(body, (int)(k & 0xff), len);
    memcpy(body, &k, len < 4 ? len : 4);
    if (memcmp(f.data, body, len) != 0) fail_msg("packet %u differs", k);
    k++;
  }
  assert_int_equal(rv, 0);
  assert_int_equal(k, n);
  free(file);
  free(body);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(scan_counts_packets_across_blocks, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(scan_waits_for_a_packet_being_written,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(scan_survives_a_length_past_the_end,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(scan_rejects_what_is_not_packets, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(scan_rejects_an_overlong_length, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(own_writes_go_direct_or_behind, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(own_packets_in_order_whatever_their_size,
                                      setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
