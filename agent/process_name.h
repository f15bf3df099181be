/* The process's name as ps shows it: the default producer name and the
 * name on the process track. Not installed. */
#ifndef TRACEGATE_AGENT_PROCESS_NAME_H
#define TRACEGATE_AGENT_PROCESS_NAME_H

#include <stdbool.h>
#include <stddef.h>

/* The process's name (/proc/self/comm) into |out| (|n| >= 1 bytes,
 * NUL-terminated); false, with |out| empty, when unreadable. */
bool tg__process_name(char *out, size_t n);

#endif /* TRACEGATE_AGENT_PROCESS_NAME_H */
