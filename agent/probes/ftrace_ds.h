/* The "linux.ftrace" data source of tracegate-probes.
 *
 * One thread reads for every session and every CPU, at the drain period
 * its config asked for, else once a second (at the default period while
 * new processes keep showing up, one in the last ten seconds:
 * tg_ftrace_drain_wait_ms), and at once when a
 * CPU's buffer fills up: it sleeps in poll(2) on the CPUs and an eventfd.
 * The agent's callbacks only hand configs and stop/flush requests to it
 * (under a mutex, then the eventfd), then
 * wait, bounded, for stop and flush to be done: a stop's last pages and end
 * stats must be written before the agent releases the instance's writers.
 * The thread owns every session from start to stop.
 */
#ifndef TRACEGATE_PROBES_FTRACE_DS_H
#define TRACEGATE_PROBES_FTRACE_DS_H

#include "agent/probes/inode_feed.h"
#include "agent/probes/pid_feed.h"

typedef struct tg_ftrace_ds tg_ftrace_ds_t;

/* Registers "linux.ftrace" and starts the reader thread, which publishes
 * the pids of each session's records to |feed| and, while the session has
 * a consumer there, the inodes to |inodes| (both borrowed until
 * tg_ftrace_ds_free; NULL: not published). Before tg_agent_init. Returns
 * 0, -ENOMEM, tg_ds_register's error or -errno. */
int tg_ftrace_ds_new(tg_pid_feed_t *feed, tg_inode_feed_t *inodes,
                     tg_ftrace_ds_t **out);
/* Stops the thread, ends every session (instances removed) and frees |f|.
 * After tg_agent_shutdown(). NULL is a no-op. */
void tg_ftrace_ds_free(tg_ftrace_ds_t *f);

#endif /* TRACEGATE_PROBES_FTRACE_DS_H */
