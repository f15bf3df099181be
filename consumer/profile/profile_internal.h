/* SPDX-License-Identifier: Apache-2.0 */
/* What the files of consumer/profile/ share: a host's growing tables and
 * the profile that holds them. Not for outside consumer/profile/. */
#ifndef TRACEGATE_CONSUMER_PROFILE_PROFILE_INTERNAL_H
#define TRACEGATE_CONSUMER_PROFILE_PROFILE_INTERNAL_H

#include "common/u64_map.h"
#include "consumer/profile/profile.h"
#include "consumer/profile/profile_intern.h"

typedef struct tg__prof_sym {
  uint32_t first_line, n_lines;
} tg__prof_sym_t;

typedef struct tg__prof_host {
  tg_prof_host_t pub;
  bool named_by_track; /* the name came from the merge's name track */
  char *name;
  tg__prof_itab_t strs, maps, frames, stacks, syms;
  tg_prof_mapping_t *mappings;
  tg_prof_frame_t *frame_v;
  tg_prof_stack_t *stack_v;
  uint32_t *stack_frames;
  size_t n_callstacks; /* stacks of callstacks (not pseudo), bounded */
  size_t n_stack_frames, cap_stack_frames;
  tg_prof_line_t *lines;
  size_t n_lines, cap_lines;
  tg__prof_sym_t *sym_v;
  const char **str_ptrs;
  uint32_t *str_lens;
} tg__prof_host_t;

typedef struct tg__prof_seq {
  uint64_t key; /* machine << 32 | trusted_packet_sequence_id */
  uint32_t host;
  /* iid -> index + 1 in the host's tables */
  tg_u64_map_t fn, bid, path, map, frame, cs;
  uint64_t ns_per_sample, frequency_hz;
} tg__prof_seq_t;

struct tg_prof {
  tg_prof_limits_t lim;
  uint64_t seed;
  tg__prof_host_t *hosts;
  size_t n_hosts, cap_hosts;
  tg_u64_map_t host_by_machine; /* machine id -> index + 1 */
  tg__prof_seq_t *seqs;
  size_t n_seqs, cap_seqs;
  tg_u64_map_t seq_by_key;
  tg_buf_t in;      /* Trace bytes of a packet not yet whole */
  tg_buf_t inflate; /* one compressed_packets batch */
  /* One callstack's frames while it is read (max_depth each). */
  uint64_t *ring;
  uint32_t *frames_scratch, *key_scratch;
  uint64_t packets, bad_packets;
  bool ended;
};

/* The host of |machine|, made if new (NULL past max_hosts or without
 * memory: *err says which). */
tg__prof_host_t *tg__prof_host_get(tg_prof_t *p, uint32_t machine, int *err);
/* The host's string index of |s| (NUL bytes become '?'); -ENOSPC past a
 * bound. */
int tg__prof_str(tg_prof_t *p, tg__prof_host_t *h, const uint8_t *s, size_t n,
                 uint32_t *idx);
/* A build id as the outputs give it: lowercase hex, kept as it is when it
 * already is such text. */
int tg__prof_build_id(tg_prof_t *p, tg__prof_host_t *h, const uint8_t *s,
                      size_t n, uint32_t *idx);
/* ModuleSymbols of |h| (the packet's field 61). */
int tg__prof_module_symbols(tg_prof_t *p, tg__prof_host_t *h,
                            const uint8_t *b, size_t n);
/* Gives frames their symbols, counts, string pointers: at tg_prof_end. */
int tg__prof_host_finish(tg_prof_t *p, tg__prof_host_t *h);
void tg__prof_host_free(tg__prof_host_t *h);
/* Appends |n| bytes gzipped to |out|, the gzip header without a name or a
 * time (the same input, the same bytes). 0, -ENOMEM, TG_EPROTO_ENCODE. */
int tg__prof_gzip_append(const uint8_t *p, size_t n, tg_buf_t *out);

#endif /* TRACEGATE_CONSUMER_PROFILE_PROFILE_INTERNAL_H */
