/* The service side of one SMB, simulated for the agent's tests.
 *
 * Takes CommitData from the arbiter exactly as the agent would send it,
 * decodes it with protobuf-c (as tracegated does), copies each moved chunk
 * out of the SMB and frees it, and feeds chunks and patches into the
 * service's real central trace buffer, so the tests check that what the
 * writer produces is what the service accepts. It also keeps a raw log of
 * every chunk and patch for a strict reassembler (fake_service_reassemble)
 * that checks the writer's framing to the letter and has no limit on the
 * number of fragments per packet.
 *
 * Not thread-safe: one thread drives a fake service (a test's "service"
 * thread, or the test thread itself).
 */
#ifndef TRACEGATE_TESTS_AGENT_FAKE_SERVICE_H
#define TRACEGATE_TESTS_AGENT_FAKE_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/smb.h"
#include "agent/smb_arbiter.h"
#include "service/trace_buffer.h"
#include "common/buf.h"

typedef struct fs_chunk {
  uint8_t *data; /* a copy: header + payload */
  size_t size;
  uint16_t writer_id;
  uint32_t chunk_id;
  bool needs_patching;
  bool patched_final; /* a patch group with has_more_patches = false came */
} fs_chunk_t;

typedef struct fs_patch_group {
  uint16_t writer_id;
  uint32_t chunk_id;
  size_t n;
  uint32_t offsets[32];
  uint8_t data[32][4];
  bool has_more;
} fs_patch_group_t;

typedef struct fake_service {
  tg_arbiter_t *arb;
  tg_smb_t smb; /* the arbiter's view, writable like the service's map */
  tg_trace_buffer_t *tb; /* NULL: raw log only */
  tg_producer_ident_t ident;
  size_t max_bytes; /* per take_commit */
  bool keep_raw;
  /* Keep moved chunks BeingRead (a slow service) until release_held. */
  bool hold;
  tg_smb_chunk_t *held;
  size_t nheld, held_cap;

  tg_buf_t buf;
  fs_chunk_t *chunks; /* raw log, in commit order */
  size_t nchunks, chunks_cap;
  fs_patch_group_t *groups;
  size_t ngroups, groups_cap;

  uint64_t commits, moves, patches;
  uint64_t last_flush_id;
  size_t max_commit_size;
  unsigned errors; /* anything a real service would count as a violation */
} fake_service_t;

/* |tb_size| 0: no trace buffer. */
void fake_service_init(fake_service_t *fs, tg_arbiter_t *arb, size_t tb_size,
                       bool keep_raw);
void fake_service_free(fake_service_t *fs);

/* One take_commit with |flush_id| applied. Returns take_commit's result;
 * |*appended| (if not NULL) gets the request's size. */
int fake_service_commit(fake_service_t *fs, uint64_t flush_id,
                        size_t *appended);
/* Commits until the batch is empty. Returns the number of requests. */
unsigned fake_service_drain(fake_service_t *fs);
void fake_service_release_held(fake_service_t *fs);

/* Next packet from the trace buffer, concatenated into |out| (reset
 * first). Returns 1, or 0 when nothing is readable. */
int fake_service_read(fake_service_t *fs, tg_buf_t *out, bool *prev_dropped,
                      uint16_t *writer_id);

/* Reassembles the raw log of |writer_id|. For every packet calls |cb|; a
 * dropped packet (drop marker) calls it with data NULL. Returns the number
 * of framing errors found (non-consecutive ids, a continuation without a
 * start, a chunk needing patches that never got its final patch, ...). */
typedef void (*fs_packet_cb)(void *ctx, const uint8_t *data, size_t len);
unsigned fake_service_reassemble(const fake_service_t *fs, uint16_t writer_id,
                                 fs_packet_cb cb, void *ctx);

#endif /* TRACEGATE_TESTS_AGENT_FAKE_SERVICE_H */
