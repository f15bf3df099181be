/* tg_agent_activate_triggers: names queued by any thread, sent by the
 * agent's thread in one ActivateTriggers as soon as it is connected (at
 * once if it is), as Perfetto's SDK does with Tracing::ActivateTriggers.
 *
 * The queue is this file's and guarded by its own mutex; the agent's
 * thread takes it whole and sends it. Names still queued at shutdown are
 * dropped: the service never saw them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent_internal.h"
#include "agent/agent_log.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "tracegate/error.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char *g_pending[TG_AGENT_MAX_PENDING_TRIGGERS];
static size_t g_n_pending;

static void free_names(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
}

int tg_agent_activate_triggers(const char *const *names, size_t n) {
  if (!names || n == 0) return -EINVAL;
  for (size_t i = 0; i < n; i++)
    if (!names[i] || !names[i][0] || strlen(names[i]) > TG_AGENT_MAX_TRIGGER_NAME)
      return -EINVAL;
  if (!__atomic_load_n(&tg__agent.th.running, __ATOMIC_ACQUIRE))
    return TG_ENOT_CONNECTED;
  if (n > TG_AGENT_MAX_PENDING_TRIGGERS) return -ENOSPC;
  char *copies[TG_AGENT_MAX_PENDING_TRIGGERS];
  for (size_t i = 0; i < n; i++) {
    copies[i] = strdup(names[i]);
    if (!copies[i]) {
      free_names(copies, i);
      return -ENOMEM;
    }
  }
  pthread_mutex_lock(&g_mu);
  bool fits = g_n_pending + n <= TG_AGENT_MAX_PENDING_TRIGGERS;
  if (fits) {
    memcpy(g_pending + g_n_pending, copies, n * sizeof(*copies));
    g_n_pending += n;
  }
  pthread_mutex_unlock(&g_mu);
  if (!fits) {
    free_names(copies, n);
    return -ENOSPC;
  }
  tg__agent_wake(NULL);
  return 0;
}

void tg__triggers_send_pending(void) {
  if (!tg__connection_ready()) return; /* sent once connected */
  char *names[TG_AGENT_MAX_PENDING_TRIGGERS];
  pthread_mutex_lock(&g_mu);
  size_t n = g_n_pending;
  memcpy(names, g_pending, n * sizeof(*names));
  g_n_pending = 0;
  pthread_mutex_unlock(&g_mu);
  if (n == 0) return;
  Perfetto__Protos__ActivateTriggersRequest r =
      PERFETTO__PROTOS__ACTIVATE_TRIGGERS_REQUEST__INIT;
  r.n_trigger_names = n;
  r.trigger_names = names;
  /* A failure is logged by tg__conn_invoke; the names are not retried:
   * a trigger is an event of its moment, not state to restore. */
  tg__conn_invoke("ActivateTriggers", &r.base, NULL, NULL);
  free_names(names, n);
}

void tg__triggers_drop_pending(void) {
  pthread_mutex_lock(&g_mu);
  size_t n = g_n_pending;
  g_n_pending = 0;
  free_names(g_pending, n);
  pthread_mutex_unlock(&g_mu);
  if (n) tg__agent_log(TG_LOG_INFO, "agent: %zu trigger(s) dropped: never connected", n);
}
