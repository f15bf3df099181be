/* Log levels, shared by the daemons' logger (common/log.h) and the agent's
 * log callback (tracegate/agent.h), so an app and tracegate's own tools
 * speak of severity in one vocabulary. Installed with the agent's API. */
#ifndef TRACEGATE_LOG_LEVEL_H
#define TRACEGATE_LOG_LEVEL_H

typedef enum tg_log_level {
  TG_LOG_ERROR = 0,
  TG_LOG_WARN = 1,
  TG_LOG_INFO = 2,
  TG_LOG_DEBUG = 3,
} tg_log_level_t;

#endif /* TRACEGATE_LOG_LEVEL_H */
