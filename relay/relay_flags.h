/* SPDX-License-Identifier: Apache-2.0 */
/* tracegate-relay's flags: its options, the flag table that fills them,
 * and the rules between the flags as data (common/flag_rules.h). Pure:
 * main.c parses with them, tests/relay/test_relay_flags.c walks them. */
#ifndef TRACEGATE_RELAY_FLAGS_H
#define TRACEGATE_RELAY_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/flag_rules.h"
#include "common/flags.h"

#define RELAY_DEFAULT_LISTEN "0.0.0.0:7467"

typedef struct relay_opts {
  const char *listen;
  const char *consumer_socket;
  const char *cert, *key, *ca, *crl; /* NULL: not given */
  const char *authz_path, *audit_path;
  const char *compress; /* --compress: allow or never */
  uint64_t max_conns, hs_timeout, idle_timeout;
  uint64_t evict_after_ms;
  uint64_t per_identity; /* 0: half of --max-conns */
  uint64_t high_water_kb;
  uint64_t dead_link_s;
  uint64_t session_lease_ms;
  uint64_t replay_window_kb;
  uint64_t ready_fd;
  uint64_t ticket_lifetime_s;
  uint64_t audit_burst, audit_per_s; /* --audit-burst, --audit-lines-per-s */
  int log_level;
  bool stdio;
} relay_opts_t;

/* |o| at the defaults (the strings are static). */
void relay_opts_defaults(relay_opts_t *o);

/* Room for the relay's flag table. */
#define RELAY_MAX_FLAGS 32

/* Fills |out| (|cap| entries) with the flags, targets in |o| (the
 * caller's, alive while the table is used). Returns the number of flags,
 * or 0 when |cap| is too small. */
size_t relay_flag_table(relay_opts_t *o, tg_flag_t *out, size_t cap);

/* The rules between the relay's flags (static storage). */
extern const tg_flag_rule_t relay_rules[];
extern const size_t relay_n_rules;

#endif /* TRACEGATE_RELAY_FLAGS_H */
