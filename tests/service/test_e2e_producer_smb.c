/* tracegated end to end: a producer that brings its own SMB
 * (InitializeConnectionRequest.producer_provided_shmem with the fd on the
 * request, as Perfetto's startup tracing does).
 *
 * A sealed memfd of a valid geometry is adopted: the reply says so, the
 * SetupTracing that follows carries no fd, and the packets the producer
 * writes into its own memory reach the trace. Anything else falls back to
 * a service SMB (the reply says using_shmem_provided_by_producer=false,
 * SetupTracing brings one) and the producer traces through that. A
 * producer that turns on its adopted SMB (truncation, hole punching,
 * garbage in every page) cannot crash the service: the teardown requires
 * it to exit 0 on SIGTERM, under ASan. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "pb/ipc/producer_port.pb-c.h"
#include "pb/trace/test_event.pb-c.h"
#include "test_service.h"

#define KB 1024u
#define ALL_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* A memfd of |size| bytes; |seals| < 0: made without MFD_ALLOW_SEALING. */
static int make_memfd(size_t size, int seals) {
  int fd = memfd_create("tg-test-own-smb",
                        MFD_CLOEXEC | (seals >= 0 ? MFD_ALLOW_SEALING : 0));
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, (off_t)size), 0);
  if (seals > 0) assert_int_equal(fcntl(fd, F_ADD_SEALS, seals), 0);
  return fd;
}

typedef struct offer {
  int fd; /* sent with InitializeConnection when >= 0 (the test keeps it) */
  bool flag; /* producer_provided_shmem */
  uint32_t size_hint, page_hint;
} offer_t;

/* raw_producer_connect() with an SMB offer; returns the reply's
 * using_shmem_provided_by_producer. */
static bool connect_offering(raw_producer_t *p, const test_service_t *ts,
                             const char *name, const char *ds_name,
                             const offer_t *o) {
  memset(p, 0, sizeof(*p));
  assert_int_equal(raw_connect(&p->conn, ts->producer_sock), 0);
  assert_int_equal(raw_bind(&p->conn, "ProducerPort"), 0);
  Perfetto__Protos__InitializeConnectionRequest init =
      PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
  init.producer_name = (char *)name;
  init.has_shared_memory_page_size_hint_bytes = o->page_hint != 0;
  init.shared_memory_page_size_hint_bytes = o->page_hint;
  init.has_shared_memory_size_hint_bytes = o->size_hint != 0;
  init.shared_memory_size_hint_bytes = o->size_hint;
  init.has_producer_provided_shmem = o->flag;
  init.producer_provided_shmem = o->flag;
  ProtobufCMessage *reply = NULL;
  assert_int_equal(raw_call(&p->conn, "InitializeConnection", &init.base, o->fd,
                            &perfetto__protos__initialize_connection_response__descriptor,
                            &reply, 5000), 1);
  Perfetto__Protos__InitializeConnectionResponse *r =
      (Perfetto__Protos__InitializeConnectionResponse *)reply;
  assert_non_null(r);
  assert_true(r->has_using_shmem_provided_by_producer);
  /* Patches may be written into chunks not released yet. */
  assert_true(r->has_direct_smb_patching_supported &&
              r->direct_smb_patching_supported);
  bool own = r->using_shmem_provided_by_producer;
  perfetto__protos__initialize_connection_response__free_unpacked(r, NULL);
  Perfetto__Protos__GetAsyncCommandRequest gac =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_REQUEST__INIT;
  p->async_req = raw_invoke(&p->conn, "GetAsyncCommand", &gac.base, -1, false);
  assert_true(p->async_req > 0);
  Perfetto__Protos__DataSourceDescriptor d = PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
  d.name = (char *)ds_name;
  Perfetto__Protos__RegisterDataSourceRequest rd =
      PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
  rd.data_source_descriptor = &d;
  assert_int_equal(raw_call(&p->conn, "RegisterDataSource", &rd.base, -1, NULL,
                            NULL, 5000), 1);
  return own;
}

/* The producer maps its own |fd| as the raw producer's SMB. */
static void map_own(raw_producer_t *p, int fd, size_t size, size_t page) {
  p->smb_map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  assert_true(p->smb_map != MAP_FAILED);
  p->smb_size = size;
  assert_int_equal(tg_smb_init(&p->smb, p->smb_map, size, page), 0);
}

/* The first command after an adoption: SetupTracing without an fd and
 * without a page size (Perfetto's client aborts on an fd there). */
static void expect_setup_tracing_without_fd(raw_producer_t *p) {
  raw_frame_t f;
  assert_int_equal(raw_wait(&p->conn, (uint64_t)p->async_req, 5000, &f), 1);
  assert_int_equal(f.frame->msg_case,
                   PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY);
  ProtobufCBinaryData *b = &f.frame->msg_invoke_method_reply->reply_proto;
  Perfetto__Protos__GetAsyncCommandResponse *cmd =
      perfetto__protos__get_async_command_response__unpack(NULL, b->len, b->data);
  assert_non_null(cmd);
  assert_int_equal(cmd->cmd_case,
                   PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING);
  assert_false(cmd->setup_tracing->has_shared_buffer_page_size_kb);
  assert_int_equal(raw_take_fd(&p->conn), -1);
  perfetto__protos__get_async_command_response__free_unpacked(cmd, NULL);
  tg_ipc_frame_free(f.frame);
}

static void commit_packets(raw_producer_t *p, uint32_t page, uint32_t chunk_id,
                           const char *str, uint32_t first, unsigned n) {
  assert_int_equal(raw_producer_write_packets(p, page, 0, 1, chunk_id, str,
                                              first, n), 0);
  assert_int_equal(raw_producer_commit(p, &page, (const uint32_t[]){0}, 1, 0), 0);
}

/* Test packets with |str| in the trace; they must be 0.. in order. */
static size_t count_str(Perfetto__Protos__TracePacket **pk, size_t n,
                        const char *str) {
  Perfetto__Protos__TracePacket *tp[512];
  size_t k = test_packets(pk, n, tp, 512);
  size_t got = 0;
  for (size_t i = 0; i < k; i++) {
    if (!tp[i]->for_testing->str || strcmp(tp[i]->for_testing->str, str)) continue;
    assert_int_equal(tp[i]->for_testing->seq_value, got);
    got++;
  }
  return got;
}

typedef struct trace {
  Perfetto__Protos__TracePacket **pk;
  size_t n;
  const Perfetto__Protos__TraceStats *st;
} trace_t;

static void disable_and_read(raw_consumer_t *c, trace_t *t) {
  assert_int_equal(raw_consumer_disable(c, 5000), 0);
  t->pk = raw_consumer_read(c, &t->n);
  assert_non_null(t->pk);
  t->st = find_trace_stats(t->pk, t->n);
  assert_non_null(t->st);
}

/* A producer whose own sealed memfd of |size| bytes (pages of |page|) is
 * adopted, and a session of its data source |ds| started on it. Returns
 * the producer's fd to the file. */
static int start_with_own_smb(test_service_t *ts, raw_producer_t *p,
                              raw_consumer_t *c, simple_cfg_t *sc,
                              const char *name, const char *ds, size_t size,
                              size_t page) {
  int fd = make_memfd(size, ALL_SEALS);
  offer_t o = {fd, true, (uint32_t)size, (uint32_t)page};
  assert_true(connect_offering(p, ts, name, ds, &o));
  map_own(p, fd, size, page);
  simple_cfg_init(sc, 256, 1, ds);
  assert_int_equal(raw_consumer_connect(c, ts), 0);
  assert_int_equal(raw_consumer_enable(c, &sc->cfg, -1), 0);
  expect_setup_tracing_without_fd(p);
  assert_int_equal(raw_producer_wait_started(p, 5000), 0);
  assert_int_not_equal(p->target_buffer, 0);
  return fd;
}

/* Perfetto's TestProducerProvidedSMB: the producer's own sealed memfd is
 * the SMB; what it writes there is read by the service (which frees the
 * chunks in the producer's memory) and reaches the trace. */
static void own_sealed_memfd_smb_carries_the_packets(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  raw_consumer_t c;
  simple_cfg_t sc;
  int fd = start_with_own_smb(ts, &p, &c, &sc, "own-smb", "own.ds", 64 * KB,
                              8 * KB);

  commit_packets(&p, 0, 0, "own", 0, 5);
  /* The service released the chunk in our memory: the page is free. */
  assert_int_equal(tg_smb_page_bitmap(&p.smb, 0), 0);
  commit_packets(&p, 7, 1, "own", 5, 5); /* the last page */

  trace_t t;
  disable_and_read(&c, &t);
  assert_int_equal(count_str(t.pk, t.n, "own"), 10);
  assert_int_equal(t.st->buffer_stats[0]->abi_violations, 0);
  free_packets(t.pk, t.n);
  raw_consumer_close(&c);
  raw_producer_close(&p);
  close(fd);
}

/* Every offer the service must not map, each from its own producer of the
 * same data source: each is told to use the service's SMB, gets it with
 * SetupTracing and traces through it. */
static void unacceptable_offers_fall_back_to_a_service_smb(void **state) {
  test_service_t *ts = *state;
  enum { N = 13 };
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  int sealed = make_memfd(64 * KB, ALL_SEALS);
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", sealed);
  int read_only = open(path, O_RDONLY | O_CLOEXEC);
  assert_true(read_only >= 0);
  const struct {
    const char *name;
    offer_t o;
  } cases[N] = {
      {"size-not-page-multiple", {make_memfd(68 * KB, ALL_SEALS), true, 68 * KB, 8 * KB}},
      {"page-6k", {make_memfd(60 * KB, ALL_SEALS), true, 60 * KB, 6 * KB}},
      {"page-64k", {make_memfd(128 * KB, ALL_SEALS), true, 128 * KB, 64 * KB}},
      {"page-unannounced", {make_memfd(64 * KB, ALL_SEALS), true, 64 * KB, 0}},
      {"too-large", {make_memfd(64u * KB * KB, ALL_SEALS), true, 64u * KB * KB, 4 * KB}},
      {"empty", {make_memfd(0, ALL_SEALS), true, 0, 4 * KB}},
      {"size-not-the-announced-one", {make_memfd(64 * KB, ALL_SEALS), true, 128 * KB, 4 * KB}},
      {"unsealed", {make_memfd(64 * KB, -1), true, 64 * KB, 4 * KB}},
      {"sealed-shrink-only", {make_memfd(64 * KB, F_SEAL_SHRINK), true, 64 * KB, 4 * KB}},
      {"read-only-fd", {read_only, true, 64 * KB, 4 * KB}},
      {"socket", {sv[0], true, 64 * KB, 4 * KB}},
      {"flag-without-fd", {-1, true, 64 * KB, 4 * KB}},
      {"fd-without-flag", {make_memfd(64 * KB, ALL_SEALS), false, 64 * KB, 4 * KB}},
  };
  raw_producer_t p[N];
  for (int i = 0; i < N; i++)
    assert_false(connect_offering(&p[i], ts, cases[i].name, "fb.ds", &cases[i].o));

  raw_consumer_t c;
  simple_cfg_t sc;
  simple_cfg_init(&sc, 512, 1, "fb.ds");
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  for (int i = 0; i < N; i++) {
    assert_int_equal(raw_producer_wait_started(&p[i], 5000), 0); /* an SMB came */
    assert_true(p[i].page_size_kb >= 4);
    commit_packets(&p[i], 0, 0, cases[i].name, 0, 3);
  }
  trace_t t;
  disable_and_read(&c, &t);
  for (int i = 0; i < N; i++) {
    /* The producer's own memory was never written by the service. */
    assert_int_equal(count_str(t.pk, t.n, cases[i].name), 3);
    raw_producer_close(&p[i]);
    if (cases[i].o.fd >= 0) close(cases[i].o.fd);
  }
  free_packets(t.pk, t.n);
  raw_consumer_close(&c);
  close(sv[1]);
  close(sealed);
}

/* Fills the whole SMB with bytes from a simple generator (garbage bitmaps,
 * layouts, chunk headers and fragment sizes). */
static void scribble(uint8_t *m, size_t size, uint32_t seed) {
  for (size_t i = 0; i < size; i++) {
    seed = seed * 1103515245u + 12345u;
    m[i] = (uint8_t)(seed >> 16);
  }
}

/* Every (page, chunk) of an SMB of |pages| pages, committed at once into
 * the producer's buffer. */
static void commit_everything(raw_producer_t *p, size_t pages) {
  raw_move_t mv[64];
  size_t n = 0;
  for (uint32_t pg = 0; pg < pages; pg++) {
    for (uint32_t ci = 0; ci < TG_SMB_MAX_CHUNKS_PER_PAGE; ci++) {
      mv[n++] = (raw_move_t){pg, ci, p->target_buffer};
      if (n == 64) {
        assert_int_equal(raw_producer_commit_ex(p, mv, n, NULL, 0, 0, false), 0);
        n = 0;
      }
    }
  }
  if (n) assert_int_equal(raw_producer_commit_ex(p, mv, n, NULL, 0, 0, false), 0);
}

/* The producer cannot shrink or grow the adopted file, nor seal it against
 * writes; punching holes into it and scribbling over every page while
 * committing and being scraped costs only its own data. */
static void hostile_producer_cannot_crash_the_service_through_its_smb(
    void **state) {
  test_service_t *ts = *state;
  const size_t size = 32 * KB, page = 4 * KB;
  raw_producer_t p;
  raw_consumer_t c;
  simple_cfg_t sc;
  int fd = start_with_own_smb(ts, &p, &c, &sc, "hostile", "hostile.ds", size,
                              page);
  commit_packets(&p, 0, 0, "before", 0, 4);

  /* What would SIGBUS the service is refused by the kernel. */
  assert_int_equal(ftruncate(fd, 0), -1);
  assert_int_equal(errno, EPERM);
  assert_int_equal(ftruncate(fd, (off_t)size / 2), -1);
  assert_int_equal(ftruncate(fd, (off_t)size * 2), -1);
  assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1);

  /* A chunk left BeingWritten by a registered writer, then every page
   * punched out: the service reads zeros (nothing to scrape or move). */
  assert_int_equal(raw_producer_register_writer(&p, 2), 0);
  uint8_t pk[64];
  const uint8_t *f = pk;
  size_t l = make_test_packet(pk, sizeof(pk), "punched", 0);
  assert_int_equal(raw_producer_write_chunk_ex(&p, 1, 0, TG_PAGE_DIV_4, 2, 0, 0,
                                               &f, &l, 1, false), 0);
  assert_int_equal(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                             (off_t)size), 0);
  assert_int_equal(tg_smb_page_bitmap(&p.smb, 1), 0);
  commit_everything(&p, size / page);

  /* Garbage everywhere, committed, then scraped when the session stops
   * and again when the producer disconnects. */
  for (uint32_t round = 0; round < 8; round++) {
    scribble(p.smb_map, size, round);
    commit_everything(&p, size / page);
  }
  memset(p.smb_map, 0xFF, size); /* every state Complete, reserved layout */
  commit_everything(&p, size / page);
  scribble(p.smb_map, size, 99);

  trace_t t;
  disable_and_read(&c, &t);
  assert_int_equal(count_str(t.pk, t.n, "before"), 4);
  assert_true(t.st->buffer_stats[0]->abi_violations > 0);
  free_packets(t.pk, t.n);
  raw_consumer_close(&c);
  assert_true(raw_hangup(&p.conn, 5000)); /* the service scraped garbage */
  if (p.smb_map) munmap(p.smb_map, p.smb_size);
  close(fd);

  /* And it still serves: a new producer and session trace as usual. */
  raw_producer_t q;
  assert_int_equal(raw_producer_connect(&q, ts, "after", "after.ds", 4, 64, false), 0);
  simple_cfg_init(&sc, 256, 1, "after.ds");
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&q, 5000), 0);
  commit_packets(&q, 0, 0, "after", 0, 2);
  disable_and_read(&c, &t);
  assert_int_equal(count_str(t.pk, t.n, "after"), 2);
  free_packets(t.pk, t.n);
  raw_consumer_close(&c);
  raw_producer_close(&q);
}

/* An unsealed SMB is refused before anything maps it, so a producer that
 * truncates it right after offering it touches nothing of the service's. */
static void truncating_a_refused_unsealed_smb_is_harmless(void **state) {
  test_service_t *ts = *state;
  int fd = make_memfd(64 * KB, -1);
  raw_producer_t p;
  offer_t o = {fd, true, 64 * KB, 4 * KB};
  assert_false(connect_offering(&p, ts, "truncator", "trunc.ds", &o));
  assert_int_equal(ftruncate(fd, 0), 0);
  raw_consumer_t c;
  simple_cfg_t sc;
  simple_cfg_init(&sc, 256, 1, "trunc.ds");
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&p, 5000), 0);
  assert_int_equal(ftruncate(fd, 4 * KB), 0);
  commit_packets(&p, 0, 0, "service-smb", 0, 3);
  trace_t t;
  disable_and_read(&c, &t);
  assert_int_equal(count_str(t.pk, t.n, "service-smb"), 3);
  free_packets(t.pk, t.n);
  raw_consumer_close(&c);
  raw_producer_close(&p);
  close(fd);
}

/* The values of the test packets with |str| among |pk|, in order, into
 * |out| (at most |max|); returns how many. */
static size_t values_of(Perfetto__Protos__TracePacket **pk, size_t n,
                        const char *str, uint32_t *out, size_t max) {
  Perfetto__Protos__TracePacket *tp[512];
  size_t k = test_packets(pk, n, tp, 512), got = 0;
  for (size_t i = 0; i < k && got < max; i++)
    if (tp[i]->for_testing->str && !strcmp(tp[i]->for_testing->str, str))
      out[got++] = tp[i]->for_testing->seq_value;
  return got;
}

/* A consumer's Flush, answered by the producer (with nothing committed):
 * the service then scrapes the producer's SMB, Complete chunks included,
 * as Perfetto's does when a flush completes. */
static void flush_acked(raw_consumer_t *c, raw_producer_t *p) {
  Perfetto__Protos__FlushRequest fr = PERFETTO__PROTOS__FLUSH_REQUEST__INIT;
  fr.has_timeout_ms = true;
  fr.timeout_ms = 5000;
  int64_t req = raw_invoke(&c->conn, "Flush", &fr.base, -1, false);
  assert_true(req > 0);
  uint64_t id = raw_producer_wait_flush(p, p->last_flush_id, 5000);
  assert_true(id > 0);
  assert_int_equal(raw_producer_commit(p, NULL, NULL, 0, id), 0);
  assert_int_equal(raw_wait_reply(&c->conn, (uint64_t)req, NULL, NULL, 5000), 1);
}

/* A Complete chunk scraped at a flush and read out whole before its
 * CommitData comes: the CommitData brings the same bytes, which are
 * neither read again nor counted as a discarded chunk (make demo's
 * relayed recordings showed chunks_discarded 3-5, or packets twice). */
static void scraped_chunk_read_before_its_commit_is_read_once(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  raw_consumer_t c;
  simple_cfg_t sc;
  assert_int_equal(raw_producer_connect(&p, ts, "scraped", "scraped.ds", 4, 64,
                                        false), 0);
  simple_cfg_init(&sc, 256, 1, "scraped.ds");
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&p, 5000), 0);
  assert_int_equal(raw_producer_register_writer(&p, 1), 0);

  /* Chunk 0 Complete in the SMB, its CommitData not sent yet. */
  assert_int_equal(raw_producer_write_packets(&p, 0, 0, 1, 0, "sc", 0, 5), 0);
  flush_acked(&c, &p);
  size_t n;
  Perfetto__Protos__TracePacket **pk = raw_consumer_read(&c, &n);
  assert_non_null(pk);
  uint32_t v[32];
  size_t got = values_of(pk, n, "sc", v, 32);
  free_packets(pk, n);
  assert_int_equal(got, 5);
  for (uint32_t i = 0; i < 5; i++) assert_int_equal(v[i], i);

  /* Now its CommitData, then the writer's next chunk. */
  assert_int_equal(raw_producer_commit(&p, (const uint32_t[]){0},
                                       (const uint32_t[]){0}, 1, 0), 0);
  assert_int_equal(raw_producer_write_packets(&p, 1, 0, 1, 1, "sc", 5, 5), 0);
  assert_int_equal(raw_producer_commit(&p, (const uint32_t[]){1},
                                       (const uint32_t[]){0}, 1, 0), 0);
  trace_t t;
  disable_and_read(&c, &t);
  got = values_of(t.pk, t.n, "sc", v, 32);
  assert_int_equal(got, 5);
  for (uint32_t i = 0; i < 5; i++) assert_int_equal(v[i], 5 + i);
  assert_int_equal(t.st->buffer_stats[0]->chunks_discarded, 0);
  assert_int_equal(t.st->chunks_discarded, 0);
  free_packets(t.pk, t.n);
  raw_consumer_close(&c);
  raw_producer_close(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(own_sealed_memfd_smb_carries_the_packets,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(unacceptable_offers_fall_back_to_a_service_smb,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(
          hostile_producer_cannot_crash_the_service_through_its_smb,
          test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(
          scraped_chunk_read_before_its_commit_is_read_once,
          test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(truncating_a_refused_unsealed_smb_is_harmless,
                                      test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
