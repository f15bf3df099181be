/* Logging for the agent library's files. The library never prints: lines
 * go to the app's sink (tg_agent_options_t.log), or nowhere. Not
 * installed. */
#ifndef TRACEGATE_AGENT_AGENT_LOG_H
#define TRACEGATE_AGENT_AGENT_LOG_H

#include "tracegate/agent.h"

/* Formats one line (at most 511 bytes) for the app's sink when |level| is
 * at or above the app's log level. Any thread. */
void tg__agent_log(tg_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* TRACEGATE_AGENT_AGENT_LOG_H */
