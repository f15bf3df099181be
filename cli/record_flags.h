/* SPDX-License-Identifier: Apache-2.0 */
/* `tracegate record`'s flag table and the rules between its flags, as data
 * (common/flag_rules.h), apart from record.c for their unit test
 * (tests/consumer/test_record_flags.c). */
#ifndef TRACEGATE_CLI_RECORD_FLAGS_H
#define TRACEGATE_CLI_RECORD_FLAGS_H

#include "cli/record.h"
#include "common/flag_rules.h"

#define DEFAULT_BUFFER "32mb"
#define DEFAULT_RECONNECT "60s"
#define DEFAULT_COMPRESS "zstd:1"
#define DEFAULT_GRACE "60s"
#define DEFAULT_DEAD_LINK "10s"
#define DEFAULT_CLOCK_SYNC "30s"

/* zstd's highest level, the most --compress asks of a relay. */
#define COMPRESS_LEVEL_MAX 19

/* Room for record's flag table. */
#define RECORD_MAX_FLAGS 48

/* Fills |out| (|cap| entries) with record's flags, their targets in |o|
 * and the -H list in |hosts| (both the caller's, alive while the table is
 * used). Returns the number of flags, or 0 when |cap| is too small. */
size_t record_flag_table(record_opts_t *o, tg_flag_list_t *hosts,
                         tg_flag_t *out, size_t cap);

/* What a command line asks record to do; each has its own rules. */
typedef enum record_mode {
  RECORD_MODE_BUGREPORT_ALL, /* --save-all-for-bugreport */
  RECORD_MODE_BUGREPORT,     /* --save-for-bugreport */
  RECORD_MODE_IS_DETACHED,   /* --is_detached KEY */
  RECORD_MODE_CLONE,         /* --clone ID, --clone-by-name NAME */
  RECORD_MODE_RECORD,        /* a recording, local or -H */
  RECORD_MODES
} record_mode_t;

/* The mode of parsed options; the first that applies, in the enum's
 * order. */
record_mode_t record_mode(const record_opts_t *o);

/* One rule table (static storage). */
typedef struct record_rules {
  const tg_flag_rule_t *rules;
  size_t n;
} record_rules_t;

#define RECORD_MAX_RULE_TABLES 2

/* The rule tables mode |m| checks, in order, into |out|; returns how
 * many (at most RECORD_MAX_RULE_TABLES). */
size_t record_rules_of(record_mode_t m, record_rules_t *out);

/* Checks the flags |given| of table |flags| (record_flag_table(), parsed
 * into |o|) against the rules of |o|'s mode. Returns 0, or -EINVAL with
 * the message in |err| and the broken rule's place in *|table| (of
 * record_rules_of()) and *|rule| when not NULL (or another negative code
 * for a bug in the rules, as tg_flag_rules_check()). */
int record_check_flags(const record_opts_t *o, const tg_flag_t *flags,
                       size_t n, const tg_flags_given_t *given, char *err,
                       size_t cap, size_t *table, size_t *rule);

#endif /* TRACEGATE_CLI_RECORD_FLAGS_H */
