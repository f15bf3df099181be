/* The merge's joined mode (merge.h, TG_MERGE_APP_JOINED; docs/merge.md,
 * "Links across hosts"): the hosts' app sequences on machine 0, where
 * trace processor joins flows across hosts. merge.c asks, per packet of a
 * host, once the packet passed its own checks:
 *
 *   tg__links_classify  before the packet's effects on the host's
 *     incremental-state and clock models: does it stay on the host's
 *     machine, go to machine 0, or is it left out (counted here)?
 *   tg__links_write     after them, for a packet going to machine 0:
 *     writes it with a corrected timestamp and its sequence id, and no
 *     machine id; the rare packets whose contents change (ClockSnapshot,
 *     process and thread descriptors) re-encoded into the merge's
 *     scratch buffer;
 *   tg__links_stayed    after them, for a packet written on the host's
 *     machine: the count of a sequence's packets before it moved.
 *
 * A sequence is followed from its first packet; it moves at its first
 * app packet (merge_links.c, "app fields") when the host has a clock
 * estimate then, else it stays on the host's machine for good: a
 * sequence's state lives per machine in trace processor, so no sequence
 * is ever split after it moved.
 *
 * Internal to tg_fleet. No allocation per packet: the tables grow to
 * their bounds (merge.h), the scratch buffer to the largest rewritten
 * packet. */
#ifndef TRACEGATE_CONSUMER_FLEET_MERGE_LINKS_H
#define TRACEGATE_CONSUMER_FLEET_MERGE_LINKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "consumer/fleet/merge.h"
#include "consumer/fleet/merge_slot.h"

/* Hints merge.c's walk of the packet gives: the packet has a field that
 * may make its sequence an app one (the walk here says for sure). */
#define TG__LINKS_HINT 1u

#define TG__LINKS_FLOWS 4

/* A packet's verdict and what its write commits. */
typedef struct tg__links {
  struct tg_merge_jseq *q; /* its sequence (NULL: not followed) */
  bool to_m0;              /* written on machine 0 */
  bool has_ts;             /* a timestamp to append: ts */
  bool rewrite;            /* re-encoded (snapshot or descriptors) */
  bool set_default;        /* the sequence's default clock becomes clock */
  bool m0_valid;           /* its sequence's state on machine 0 after it */
  /* It needs incremental state machine 0 does not have: left out (as the
   * host's state says, else as joined_early), nothing else judged. */
  bool unready;
  uint64_t ts;
  uint32_t default_clock;
  uint64_t seq_clocks; /* clocks 64..127 its ClockSnapshot defines */
  /* Its first TG__LINKS_FLOWS flow ids, read in the walk that judged it
   * (bit i of flow_ends: flow[i] ends a flow); more: walked again. */
  uint64_t flow[TG__LINKS_FLOWS];
  uint8_t n_flows, flow_ends;
  bool more_flows;
  uint64_t boot;       /* its ClockSnapshot's BOOTTIME, moved (0: none) */
} tg__links_t;

/* 1: go on (see v->to_m0); 0: left out, counted; -ENOMEM. |flags|,
 * |cleared|, |dropped|, |exempt| as merge.c's state_reads takes them. */
int tg__links_classify(tg_merge_t *m, tg_merge_host_t *mh, const uint8_t *p,
                       size_t n, uint32_t orig, unsigned hints,
                       uint64_t flags, bool cleared, bool dropped,
                       bool exempt, tg__links_t *v);

/* The packet of verdict |v| (to_m0) with sequence id |seq|: 0, or the
 * sink's error, -ENOMEM. */
int tg__links_write(tg_merge_t *m, tg_merge_host_t *mh, const uint8_t *p,
                    size_t n, uint32_t seq, const tg__links_t *v);

/* The packet of verdict |v| was written on the host's machine. */
void tg__links_stayed(const tg__links_t *v);

void tg__links_init(tg_merge_t *m);
void tg__links_free(tg_merge_t *m);
void tg__links_host_init(tg_merge_host_t *mh);
void tg__links_host_free(tg_merge_host_t *mh);

#endif /* TRACEGATE_CONSUMER_FLEET_MERGE_LINKS_H */
