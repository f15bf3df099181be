/* What the track event end-to-end tests share: the agent started against
 * a test tracegated, Perfetto's trace processor asked one query, and the
 * per-test teardown that stops the agent before the service. Failures
 * fail the running cmocka test. */
#ifndef TRACEGATE_TESTS_AGENT_TE_HARNESS_H
#define TRACEGATE_TESTS_AGENT_TE_HARNESS_H

#include <stddef.h>

#include "test_service.h"

#define TE_WAIT_MS 10000

/* The agent, as |producer_name| (a literal), connected to |ts|'s
 * tracegated, logging to stderr; categories are the caller's to
 * register. */
void te_start_agent(const test_service_t *ts, const char *producer_name);
/* The same with a policy for a full SMB (tg_agent_full_policy_t) and an
 * SMB size (0: the agent's reserve). */
void te_start_agent_with(const test_service_t *ts, const char *producer_name,
                         int on_smb_full, size_t smb_size_hint);

void te_sleep_ms(unsigned ms);

/* trace_processor_shell (in |bin|, PERFETTO_BIN) on |trace|: the answer to
 * |sql| in |out| (|cap| bytes, which it must fit with its NUL). The query
 * goes through a file in |dir|, removed after. */
void te_tp_query(const char *bin, const char *dir, const char *sql,
                 const char *trace, char *out, size_t cap);

/* A cmocka teardown: a failed test leaves the agent running, so stop it,
 * then the service. */
int te_teardown(void **state);

#endif /* TRACEGATE_TESTS_AGENT_TE_HARNESS_H */
