/* The "linux.perf" data source of tracegate-perf.
 *
 * One thread serves every session: for each, one perf event per CPU
 * (perf_event_open(2), the config's timebase) with its ring mapped, read
 * every ring_buffer_read_period_ms; each sample's callchain is turned
 * into Perfetto's frames on the host (perf_procs.h) and written as
 * perf_emit.h lays it out, on the session's one sequence. With
 * UNWIND_DWARF a session also has an unwinder thread, fed through a
 * bounded queue (perf_unwind_thread.h); the reader thread still writes
 * every packet. The agent's
 * callbacks only hand configs and stop/flush requests to the thread
 * (under a mutex, then an eventfd) and wait, bounded, for stop and flush
 * to be done: a stop's last samples, those still in the unwinder queue
 * included, must be written before the agent releases the instance's
 * writer.
 */
#ifndef TRACEGATE_PERF_PERF_DS_H
#define TRACEGATE_PERF_PERF_DS_H

typedef struct tg_perf_ds tg_perf_ds_t;

/* Registers "linux.perf" and starts the thread. Before tg_agent_init.
 * Returns 0, -ENOMEM, tg_ds_register's error or -errno. */
int tg_perf_ds_new(tg_perf_ds_t **out);
/* Stops the thread, closes every session's events and frees |d|. After
 * tg_agent_shutdown(). NULL is a no-op. */
void tg_perf_ds_free(tg_perf_ds_t *d);

#endif /* TRACEGATE_PERF_PERF_DS_H */
