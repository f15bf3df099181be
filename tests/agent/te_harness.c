/* The track event end-to-end tests' shared steps (te_harness.h). */
#include "te_harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tracegate/agent.h"

static void log_to_stderr(void *ctx, tg_log_level_t level, const char *msg) {
  (void)ctx;
  fprintf(stderr, "agent[%d]: %s\n", (int)level, msg);
}

void te_start_agent(const test_service_t *ts, const char *producer_name) {
  te_start_agent_with(ts, producer_name, TG_AGENT_FULL_STALL, 0);
}

void te_start_agent_with(const test_service_t *ts, const char *producer_name,
                         int on_smb_full, size_t smb_size_hint) {
  tg_agent_options_t o = {
      .socket_path = ts->producer_sock,
      .producer_name = producer_name,
      .smb_size_hint = smb_size_hint,
      .on_smb_full = (tg_agent_full_policy_t)on_smb_full,
      .reconnect_min_ms = 20,
      .reconnect_max_ms = 200,
      .log = log_to_stderr,
      .log_level = TG_LOG_INFO,
  };
  assert_int_equal(tg_agent_init(&o), 0);
  assert_int_equal(tg_agent_wait_connected(TE_WAIT_MS), 0);
}

void te_sleep_ms(unsigned ms) {
  struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&d, NULL);
}

void te_tp_query(const char *bin, const char *dir, const char *sql,
                 const char *trace, char *out, size_t cap) {
  char sql_path[256], cmd[1024];
  snprintf(sql_path, sizeof(sql_path), "%s/q.sql", dir);
  FILE *q = fopen(sql_path, "w");
  assert_non_null(q);
  fputs(sql, q);
  assert_int_equal(fclose(q), 0);
  snprintf(cmd, sizeof(cmd), "%s/trace_processor_shell -q %s %s 2>/dev/null",
           bin, sql_path, trace);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = 0;
  assert_int_equal(pclose(p), 0);
  unlink(sql_path);
  assert_true(n > 0 && n < cap - 1);
}

int te_teardown(void **state) {
  tg_agent_shutdown();
  return test_service_teardown(state);
}
