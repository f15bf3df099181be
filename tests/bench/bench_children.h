/* The child processes and temporary files of a bench, and what the bench
 * reads about them.
 *
 * Every child a bench starts is remembered here and ends with the bench:
 * stopped in order by bench_stop()/bench_stop_all(), at exit() (a bench
 * that bails out on an error just returns from main), SIGKILLed when the
 * bench gets SIGINT/SIGTERM/SIGHUP, and, since each child asks for
 * PR_SET_PDEATHSIG(SIGKILL), killed by the kernel if the bench crashes.
 * Children are only ever signalled by pid, never by name. Temporary
 * directories made with bench_tempdir() are removed at exit.
 *
 * Single-threaded use: call these from the bench's main thread (the
 * parent-death signal follows the thread that forked the child).
 */
#ifndef TRACEGATE_BENCH_CHILDREN_H
#define TRACEGATE_BENCH_CHILDREN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bench_args.h"

/* Installs the exit and signal hooks. Call once, first. */
void bench_children_init(void);

/* A hard bound on the whole run: after |seconds| the bench stops as on
 * SIGTERM (children killed, directories removed) and says so. */
void bench_deadline(unsigned seconds);

/* Forks and execs |argv| (argv[0] is the path). The child's stdout and
 * stderr go to |log_path| (appended; NULL: /dev/null); |keep_fd| (or -1)
 * stays open in it, every other descriptor opened with O_CLOEXEC does not.
 * Returns the pid, or -1. */
pid_t bench_spawn(const char *const argv[], int keep_fd, const char *log_path);
/* Remembers a child forked elsewhere (tests/support's tracegated). */
void bench_adopt(pid_t pid);
/* SIGTERM, wait up to |timeout_ms| for the exit, then SIGKILL. Returns the
 * wait status, or -1 when it had to be killed. Forgets the pid. */
int bench_stop(pid_t pid, int timeout_ms);
/* bench_stop() that also gives the child's CPU seconds (user + system,
 * its reaped descendants included: a forking server counts whole). */
int bench_stop_cpu(pid_t pid, int timeout_ms, double *cpu_s);
/* Waits up to |timeout_ms| for the child to exit on its own (then
 * SIGKILL); the wait status (-1: killed) and its CPU seconds as above. */
int bench_wait_cpu(pid_t pid, int timeout_ms, double *cpu_s);
/* bench_stop() for every remembered child, all signalled at once. */
void bench_stop_all(int timeout_ms);

/* Reads from |fd| (a child's ready pipe) until a newline or EOF, for up to
 * |timeout_ms|, into |buf| (NUL-terminated). Returns 0 if it starts with
 * "ready", else -1. Does not close |fd|. */
int bench_read_ready(int fd, int timeout_ms, char *buf, size_t len);

/* utime + stime of |pid| in seconds (0: this process), from /proc. */
double bench_proc_cpu_s(pid_t pid);
/* A "Vm..." line of /proc/<pid>/status in KiB (0: this process), e.g.
 * "VmRSS", "VmHWM"; -1 if unreadable. */
long bench_proc_status_kb(pid_t pid, const char *field);

/* Time of all CPUs together from /proc/stat, in clock ticks: *idle (idle
 * + iowait) and *total. Differences over a stretch tell how busy the
 * machine was, whoever kept it busy. */
void bench_machine_ticks(uint64_t *idle, uint64_t *total);

/* mkdtemp("/tmp/tg-bench-<tag>-XXXXXX") into |dir|, removed at exit.
 * Returns 0 or -1. */
int bench_tempdir(char *dir, size_t len, const char *tag);
/* Removes |dir| (an absolute path, e.g. tests/support's service
 * directory) at exit too. */
void bench_remove_at_exit(const char *dir);
/* With deploy/certs/tg-certs: a CA in <dir>/pki, a host certificate for
 * |host| and a client certificate |client| with the record role (listed in
 * <dir>/pki/authz). Returns 0 or -1. */
int bench_certs(const char *dir, const char *host, const char *client);

/* CLOCK_MONOTONIC in ms. */
double bench_now_ms(void);

#endif /* TRACEGATE_BENCH_CHILDREN_H */
