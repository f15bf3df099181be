/* "TracegateRelay": the relay's own service, answered locally on the same
 * connection as the forwarded ConsumerPort (proto/tracegate/relay.proto).
 *
 *   1 GetHostInfo    -> RelayHostInfo (hostname, machine id, kernel, ...)
 *   2 ClockSync      -> ClockSyncResponse (BOOTTIME, MONOTONIC, REALTIME)
 *   3 SetSessionKey  {key} -> remembered by the connection's frame filter
 *   4 SetCompression {algorithm, level, window_log} -> what the relay will
 *                    use; the bridge compresses from the next frame on
 *                    (refused when the relay's policy says never)
 *   5 Ack            {seq} -> the key's replay window forgets through seq
 *   6 Resume         {last_seq, cum} -> what followed, again (a stream),
 *                       or the exact loss (relay/replay_window.h)
 *
 * The host facts are gathered once at start-up (tg_relay_host_info_load(),
 * the only I/O here) and served from memory; ClockSync reads the clocks at
 * call time. The service id is far above the ids a tracing service hands
 * out (1, 2, ...) so the two never collide on one connection.
 */
#ifndef TRACEGATE_RELAY_RELAY_SERVICE_H
#define TRACEGATE_RELAY_RELAY_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "abi/protocol_limits.h"
#include "common/buf.h"

#define TG_RELAY_SERVICE_NAME "TracegateRelay"
#define TG_RELAY_SERVICE_ID 1000u

enum {
  TG_RELAY_M_GET_HOST_INFO = 1,
  TG_RELAY_M_CLOCK_SYNC = 2,
  TG_RELAY_M_SET_SESSION_KEY = 3,
  TG_RELAY_M_SET_COMPRESSION = 4,
  TG_RELAY_M_ACK = 5,
  TG_RELAY_M_RESUME = 6,
};

/* The most CPU the relay spends per byte: levels above this are lowered
 * (the relay serves many clients; past 3 zstd costs more than it saves
 * against the cipher). */
#define TG_RELAY_ZSTD_LEVEL_MAX 3
/* Windows the relay agrees to (log2 bytes); the client's ask is a cap. */
#define TG_RELAY_ZSTD_WINDOW_LOG_MIN 16
#define TG_RELAY_ZSTD_WINDOW_LOG_MAX 23

/* Whether the relay grants SetCompression (--compress). Compression comes
 * before encryption, so record sizes on the wire tell how well packets
 * compress together; an operator may keep every link plain. */
typedef enum tg_relay_compress {
  TG_RELAY_COMPRESS_ALLOW = 0,
  TG_RELAY_COMPRESS_NEVER,
} tg_relay_compress_t;


typedef struct tg_relay_host_info {
  char hostname[256];
  char machine_id[128];
  char kernel[256];
  char boot_id[64];
  uint32_t num_cpus;
} tg_relay_host_info_t;

/* Reads the host facts: gethostname, /etc/machine-id (else the boot id),
 * uname -sr, /proc/sys/kernel/random/boot_id, online CPUs. Missing facts
 * stay empty; never fails. */
void tg_relay_host_info_load(tg_relay_host_info_t *hi);

/* The method name of |id|, or NULL. */
const char *tg_relay_service_method_name(uint32_t id);

/* Appends a whole BindServiceReply frame announcing the service (success,
 * id and method table) for |request_id| to |out|. Returns 0 or an error. */
int tg_relay_service_bind_reply(uint64_t request_id, tg_buf_t *out);

/* Serialises RelayHostInfo for |hi|, |service_instance| ("" or NULL:
 * unknown, left out) and |service_down| (set only when true) into |out|
 * (appended). */
int tg_relay_service_host_info(const tg_relay_host_info_t *hi,
                               const char *service_instance, bool service_down,
                               tg_buf_t *out);

/* Names process |pid| for RelayHostInfo.service_instance: one process of
 * one boot, another name for a process started later with the same pid.
 * Where pidfds live in pidfs (Linux 6.9 on), "pidfs.<inode>": the inode
 * number is the process's own for the whole boot, and needs no /proc (the
 * relay's unit hides other users' processes there, ProtectProc=invisible).
 * Else (no pidfd_open, or no pidfs) tg_relay_proc_instance(); never that
 * after a passing failure (EMFILE...), which would give one process two
 * names. Returns 0, or -errno with |out| "". */
int tg_relay_service_instance(pid_t pid, char *out, size_t cap);

/* "proc.<pid>.<start time>": the start time in clock ticks after boot,
 * /proc/<pid>/stat field 22. Returns 0, or -errno with |out| "" (no such
 * process in our pid namespace, /proc hidden). */
int tg_relay_proc_instance(pid_t pid, char *out, size_t cap);

/* Reads the three clocks back to back and serialises ClockSyncResponse
 * into |out| (appended). */
int tg_relay_service_clock_sync(tg_buf_t *out);

/* Serialises SetSessionKeyResponse into |out| (appended). */
int tg_relay_service_session_key_reply(bool ended_with_service, tg_buf_t *out);

/* Decodes SetSessionKeyRequest from untrusted |args| and checks the key:
 * 1..TG_RELAY_SESSION_KEY_MAX printable ASCII characters, no space, no '/'
 * (the '/' separates identity and key once namespaced). Copies it into
 * |key| (|cap| > TG_RELAY_SESSION_KEY_MAX). Returns 0, or -EINVAL with
 * |why| set to a static reason. */
int tg_relay_service_parse_session_key(const uint8_t *args_untrusted,
                                       size_t len, char *key, size_t cap,
                                       const char **why);

/* Decodes SetCompressionRequest from untrusted |args| and settles what the
 * relay will use: zstd, level min(asked, TG_RELAY_ZSTD_LEVEL_MAX), window
 * as asked. Returns 0 with the reply serialised into |reply| (appended),
 * or -EINVAL with |why| set to a static reason. */
int tg_relay_service_compression(const uint8_t *args_untrusted, size_t len,
                                 int *level, int *window_log, tg_buf_t *reply,
                                 const char **why);

/* True if |key| is acceptable as a session or detach key (see above). */
bool tg_relay_key_valid(const char *key, const char **why);

#endif /* TRACEGATE_RELAY_RELAY_SERVICE_H */
