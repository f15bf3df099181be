/* TracegateRelay: host facts, clock readings, the session key request. */
#include "relay/relay_service.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "common/version.h"
#include "abi/ipc_frame.h"
#include "tracegate/error.h"
#include "pb/tracegate/relay.pb-c.h"


static const char *const method_names[] = {
    [TG_RELAY_M_GET_HOST_INFO] = "GetHostInfo",
    [TG_RELAY_M_CLOCK_SYNC] = "ClockSync",
    [TG_RELAY_M_SET_SESSION_KEY] = "SetSessionKey",
    [TG_RELAY_M_SET_COMPRESSION] = "SetCompression",
    [TG_RELAY_M_ACK] = "Ack",
    [TG_RELAY_M_RESUME] = "Resume",
};
#define N_METHODS (sizeof(method_names) / sizeof(method_names[0]) - 1)

const char *tg_relay_service_method_name(uint32_t id) {
  return id >= 1 && id <= N_METHODS ? method_names[id] : NULL;
}

/* Reads the first line of |path| into |out| (trimmed), or leaves it "". */
static void read_line(const char *path, char *out, size_t cap) {
  out[0] = 0;
  FILE *f = fopen(path, "re");
  if (!f) return;
  if (fgets(out, (int)cap, f)) out[strcspn(out, "\r\n")] = 0;
  else out[0] = 0;
  fclose(f);
}

void tg_relay_host_info_load(tg_relay_host_info_t *hi) {
  memset(hi, 0, sizeof(*hi));
  if (gethostname(hi->hostname, sizeof(hi->hostname) - 1) < 0)
    hi->hostname[0] = 0;
  read_line("/proc/sys/kernel/random/boot_id", hi->boot_id,
            sizeof(hi->boot_id));
  read_line("/etc/machine-id", hi->machine_id, sizeof(hi->machine_id));
  if (!hi->machine_id[0])
    snprintf(hi->machine_id, sizeof(hi->machine_id), "%s", hi->boot_id);
  struct utsname u;
  if (uname(&u) == 0)
    snprintf(hi->kernel, sizeof(hi->kernel), "%s %s", u.sysname, u.release);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  hi->num_cpus = n > 0 ? (uint32_t)n : 0;
}

static int pack_into(const ProtobufCMessage *m, tg_buf_t *out) {
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t *p = tg_buf_reserve(out, n ? n : 1);
  if (!p) return -ENOMEM;
  if (protobuf_c_message_pack(m, p) != n) return TG_EPROTO_ENCODE;
  tg_buf_commit(out, n);
  return 0;
}

int tg_relay_service_bind_reply(uint64_t request_id, tg_buf_t *out) {
  Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo mi[N_METHODS];
  Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo *pmi[N_METHODS];
  for (size_t i = 0; i < N_METHODS; i++) {
    perfetto__protos__ipcframe__bind_service_reply__method_info__init(&mi[i]);
    mi[i].has_id = 1;
    mi[i].id = (uint32_t)(i + 1);
    mi[i].name = (char *)method_names[i + 1];
    pmi[i] = &mi[i];
  }
  Perfetto__Protos__IPCFrame__BindServiceReply r =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE_REPLY__INIT;
  r.has_success = r.success = 1;
  r.has_service_id = 1;
  r.service_id = TG_RELAY_SERVICE_ID;
  r.n_methods = N_METHODS;
  r.methods = pmi;
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = request_id;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY;
  f.msg_bind_service_reply = &r;
  return tg_ipc_frame_append(&f, out);
}

/* pidfs's magic (linux/magic.h of 6.9; older headers lack it). */
#define TG_PIDFS_MAGIC 0x50494446

int tg_relay_service_instance(pid_t pid, char *out, size_t cap) {
  out[0] = 0;
  if (pid <= 0) return -ESRCH;
  /* The kind of name depends only on the system (kernel, seccomp), never
   * on a passing failure: one process may not get two names from one
   * relay, which the client would take for a restart. */
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0) {
    int err = errno;
    if (err != ENOSYS && err != EPERM) return -err; /* EMFILE, ESRCH... */
    return tg_relay_proc_instance(pid, out, cap);
  }
  struct statfs sf;
  struct stat st;
  if (fstatfs(fd, &sf) < 0 || fstat(fd, &st) < 0) {
    int err = errno;
    close(fd);
    return -err;
  }
  close(fd);
  /* Before pidfs, every pidfd shares one anonymous inode: no name. */
  if (sf.f_type != TG_PIDFS_MAGIC) return tg_relay_proc_instance(pid, out, cap);
  snprintf(out, cap, "pidfs.%llu", (unsigned long long)st.st_ino);
  return 0;
}

int tg_relay_proc_instance(pid_t pid, char *out, size_t cap) {
  out[0] = 0;
  if (pid <= 0) return -ESRCH;
  char path[64], line[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f) return -errno;
  bool got = fgets(line, sizeof(line), f) != NULL;
  fclose(f);
  if (!got) return -EIO;
  /* "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
   * the fields are counted from the last ')'; starttime is the 20th. */
  const char *p = strrchr(line, ')');
  if (!p) return -EPROTO;
  p++;
  for (int field = 3; field < 22; field++) {
    p += strspn(p, " ");
    p += strcspn(p, " ");
    if (!*p) return -EPROTO;
  }
  p += strspn(p, " ");
  char *end;
  errno = 0;
  unsigned long long start = strtoull(p, &end, 10);
  if (end == p || errno) return -EPROTO;
  snprintf(out, cap, "proc.%d.%llu", (int)pid, start);
  return 0;
}

int tg_relay_service_host_info(const tg_relay_host_info_t *hi,
                               const char *service_instance, bool service_down,
                               tg_buf_t *out) {
  Perfetto__Protos__RelayHostInfo r = PERFETTO__PROTOS__RELAY_HOST_INFO__INIT;
  if (service_instance && service_instance[0])
    r.service_instance = (char *)service_instance;
  if (service_down) r.has_service_down = r.service_down = 1;
  r.hostname = (char *)hi->hostname;
  r.machine_id = (char *)hi->machine_id;
  r.kernel = (char *)hi->kernel;
  r.relay_version = (char *)TG_VERSION;
  r.boot_id = (char *)hi->boot_id;
  r.has_num_cpus = 1;
  r.num_cpus = hi->num_cpus;
  return pack_into(&r.base, out);
}

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  if (clock_gettime(id, &ts) < 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int tg_relay_service_clock_sync(tg_buf_t *out) {
  Perfetto__Protos__ClockSyncResponse r =
      PERFETTO__PROTOS__CLOCK_SYNC_RESPONSE__INIT;
  /* Back to back, nothing in between: the client attributes all three to
   * the midpoint of its round trip. */
  r.boottime_ns = clock_ns(CLOCK_BOOTTIME);
  r.monotonic_ns = clock_ns(CLOCK_MONOTONIC);
  r.realtime_ns = clock_ns(CLOCK_REALTIME);
  r.has_boottime_ns = r.has_monotonic_ns = r.has_realtime_ns = 1;
  return pack_into(&r.base, out);
}

bool tg_relay_key_valid(const char *key, const char **why) {
  size_t n = key ? strlen(key) : 0;
  if (n == 0) {
    *why = "key is missing or empty";
    return false;
  }
  if (n > TG_RELAY_SESSION_KEY_MAX) {
    *why = "key is longer than 128 characters";
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)key[i];
    if (c <= 0x20 || c >= 0x7f) {
      *why = "key must be printable ASCII without spaces";
      return false;
    }
    if (c == '/') {
      *why = "key must not contain '/'";
      return false;
    }
  }
  return true;
}

int tg_relay_service_session_key_reply(bool ended_with_service, tg_buf_t *out) {
  Perfetto__Protos__SetSessionKeyResponse r =
      PERFETTO__PROTOS__SET_SESSION_KEY_RESPONSE__INIT;
  r.has_ended_with_service = ended_with_service;
  r.ended_with_service = ended_with_service;
  return pack_into(&r.base, out);
}

int tg_relay_service_parse_session_key(const uint8_t *args_untrusted,
                                       size_t len, char *key, size_t cap,
                                       const char **why) {
  Perfetto__Protos__SetSessionKeyRequest *req =
      perfetto__protos__set_session_key_request__unpack(NULL, len,
                                                        args_untrusted);
  if (!req) {
    *why = "SetSessionKeyRequest does not decode";
    return -EINVAL;
  }
  int rv = -EINVAL;
  if (tg_relay_key_valid(req->key, why)) {
    if (strlen(req->key) < cap) {
      memcpy(key, req->key, strlen(req->key) + 1);
      rv = 0;
    } else {
      *why = "key is too long";
    }
  }
  perfetto__protos__set_session_key_request__free_unpacked(req, NULL);
  return rv;
}

int tg_relay_service_compression(const uint8_t *args_untrusted, size_t len,
                                 int *level, int *window_log, tg_buf_t *reply,
                                 const char **why) {
  Perfetto__Protos__SetCompressionRequest *req =
      perfetto__protos__set_compression_request__unpack(
          NULL, len, args_untrusted ? args_untrusted : (const uint8_t *)"");
  if (!req) {
    *why = "SetCompressionRequest does not decode";
    return -EINVAL;
  }
  int rv = 0;
  if (!req->algorithm || strcmp(req->algorithm, "zstd") != 0) {
    *why = "unknown compression algorithm (this relay speaks zstd)";
    rv = -EINVAL;
  } else if (!req->has_level || req->level < 1 || req->level > 19) {
    *why = "compression level outside 1..19";
    rv = -EINVAL;
  } else if (!req->has_window_log ||
             req->window_log < TG_RELAY_ZSTD_WINDOW_LOG_MIN ||
             req->window_log > TG_RELAY_ZSTD_WINDOW_LOG_MAX) {
    *why = "compression window outside 2^16..2^23";
    rv = -EINVAL;
  } else {
    *level = req->level < TG_RELAY_ZSTD_LEVEL_MAX ? req->level
                                                   : TG_RELAY_ZSTD_LEVEL_MAX;
    *window_log = req->window_log;
    Perfetto__Protos__SetCompressionResponse r =
        PERFETTO__PROTOS__SET_COMPRESSION_RESPONSE__INIT;
    r.algorithm = "zstd";
    r.has_level = r.has_window_log = true;
    r.level = *level;
    r.window_log = *window_log;
    rv = pack_into(&r.base, reply);
  }
  perfetto__protos__set_compression_request__free_unpacked(req, NULL);
  return rv;
}
