/* A PostgreSQL server for tests (coll_pg.h). */
#include "coll_pg.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_proc.h"

#ifndef TG_PG_BINDIR
#error "TG_PG_BINDIR must name PostgreSQL's bin directory"
#endif

#define SUPERUSER "tgtest"
#define TOOL_MS 60000

static void path_of(char *out, size_t cap, const char *tool) {
  snprintf(out, cap, "%s/%s", TG_PG_BINDIR, tool);
}

bool coll_pg_installed(void) {
  static const char *const tools[] = {"initdb", "pg_ctl", "postgres",
                                      "createdb"};
  for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
    char p[512];
    path_of(p, sizeof(p), tools[i]);
    if (access(p, X_OK) != 0) return false;
  }
  return true;
}

/* Who runs the server programs: ourselves, or when root (which initdb and
 * pg_ctl refuse) an unprivileged user. */
static int server_user(uid_t *uid, gid_t *gid, bool *drop) {
  *drop = geteuid() == 0;
  if (!*drop) return 0;
  const struct passwd *pw = getpwnam("postgres");
  if (!pw) pw = getpwnam("nobody");
  if (!pw) {
    fprintf(stderr, "pg: running as root and no postgres or nobody user\n");
    return -1;
  }
  *uid = pw->pw_uid;
  *gid = pw->pw_gid;
  return 0;
}

/* Runs bindir/|tool| with |args| (NULL-terminated, argv[0] aside) as the
 * server's user, output appended to dir/tools.log; waits up to TOOL_MS.
 * Returns its exit code, or -1. */
static int run_tool(coll_pg_server_t *pg, const char *tool,
                    const char *const *args) {
  uid_t uid = 0;
  gid_t gid = 0;
  bool drop;
  if (server_user(&uid, &gid, &drop)) return -1;
  char path[512], log[320];
  path_of(path, sizeof(path), tool);
  snprintf(log, sizeof(log), "%s/tools.log", pg->dir);
  /* The full path: the tools find each other from their argv[0]. */
  const char *argv[16] = {path};
  size_t n = 1;
  for (; args[n - 1] && n < 15; n++) argv[n] = args[n - 1];
  argv[n] = NULL;
  static char *const env[] = {"PATH=/usr/bin:/bin", "LC_ALL=C", "TZ=UTC", NULL};
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0)
      _exit(126);
    int in = open("/dev/null", O_RDONLY);
    if (in < 0 || dup2(in, STDIN_FILENO) < 0) _exit(126);
    if (drop &&
        (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0))
      _exit(126);
    /* After setuid, which clears it: the tool dies with the test. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent || chdir(pg->dir) != 0) _exit(126);
    execve(path, (char *const *)argv, env);
    _exit(127);
  }
  return tg_test_exit_code(tg_test_reap(pid, TOOL_MS));
}

/* The end of dir/|name|, on stderr: why a tool failed. */
static void show_log(coll_pg_server_t *pg, const char *name) {
  char path[320], buf[2048];
  snprintf(path, sizeof(path), "%s/%s", pg->dir, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  off_t end = lseek(fd, 0, SEEK_END);
  lseek(fd, end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0,
        SEEK_SET);
  ssize_t got = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (got > 0) fprintf(stderr, "--- %s ---\n%.*s\n", name, (int)got, buf);
}

int coll_pg_start(coll_pg_server_t *pg) {
  memset(pg, 0, sizeof(*pg));
  if (tg_test_mkdtemp(pg->dir, sizeof(pg->dir), "pg")) return -1;
  uid_t uid = 0;
  gid_t gid = 0;
  bool drop;
  char data[320], sock[320], log[320], opts[512];
  snprintf(data, sizeof(data), "%s/data", pg->dir);
  snprintf(sock, sizeof(sock), "%s/sock", pg->dir);
  snprintf(log, sizeof(log), "%s/server.log", pg->dir);
  if (server_user(&uid, &gid, &drop) || mkdir(sock, 0700) != 0 ||
      (drop && (chown(pg->dir, uid, gid) != 0 || chown(sock, uid, gid) != 0)))
    goto fail;
  /* The tests kill collectors, never the server: its fsyncs buy nothing. */
  snprintf(opts, sizeof(opts),
           "-k %s -c listen_addresses='' -c fsync=off"
           " -c full_page_writes=off -c max_connections=40",
           sock);
  const char *const initdb[] = {
      "-D", data,   "-U",         SUPERUSER,   "--auth=trust",
      "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions",
      NULL};
  if (run_tool(pg, "initdb", initdb) != 0) goto fail;
  const char *const start[] = {"-D", data, "-l", log,     "-w", "-t",
                               "60", "-o", opts, "start", NULL};
  pg->up = true; /* from here on, stop() must try */
  if (run_tool(pg, "pg_ctl", start) != 0) goto fail;
  return 0;
fail:
  fprintf(stderr, "pg: cannot start a server in %s\n", pg->dir);
  show_log(pg, "tools.log");
  show_log(pg, "server.log");
  coll_pg_stop(pg);
  return -1;
}

void coll_pg_stop(coll_pg_server_t *pg) {
  if (!pg->dir[0]) return;
  if (pg->up) {
    char data[320];
    snprintf(data, sizeof(data), "%s/data", pg->dir);
    const char *const stop[] = {"-D", data,   "-m", "immediate",
                                "-w", "stop", NULL};
    if (run_tool(pg, "pg_ctl", stop) != 0) {
      fprintf(stderr, "pg: pg_ctl stop failed\n");
      show_log(pg, "tools.log");
    }
    pg->up = false;
  }
  tg_test_rm_rf(pg->dir);
  pg->dir[0] = 0;
}

int coll_pg_createdb(coll_pg_server_t *pg, char *out, size_t cap) {
  char sock[320], name[32];
  snprintf(sock, sizeof(sock), "%s/sock", pg->dir);
  snprintf(name, sizeof(name), "tg%u", ++pg->dbs);
  const char *const args[] = {"-h", sock, "-U", SUPERUSER, name, NULL};
  if (run_tool(pg, "createdb", args) != 0) {
    show_log(pg, "tools.log");
    return -1;
  }
  int n =
      snprintf(out, cap, "postgresql://%s@/%s?host=%s", SUPERUSER, name, sock);
  return n > 0 && (size_t)n < cap ? 0 : -1;
}
