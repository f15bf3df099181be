/* client/target.h: where remote tracing services are. A target is one
 * "-H" spec or hosts-file line: "host[:port]" (TLS to its
 * tracegate-relay) or "ssh://[user@]host[:port]" (`ssh host
 * tracegate-relay --stdio`). The parsers take the user's text, which may
 * be anything: every length is checked, nothing is read past it
 * (tests/fuzz/fuzz_hosts_file.c). Targets are plain values: the caller
 * owns them (a list from tg_targets_load or tg_hosts_parse is the
 * caller's to free()).
 */
#ifndef TRACEGATE_CLIENT_TARGET_H
#define TRACEGATE_CLIENT_TARGET_H

#include <stddef.h>

/* Default relay port (tracegate-relay --listen 0.0.0.0:7467). */
#define TG_RELAY_PORT 7467
/* Environment variable naming the ssh command ("ssh" by default). */
#define TG_SSH_ENV "TRACEGATE_SSH"

typedef enum tg_target_kind {
  TG_TARGET_TLS,
  TG_TARGET_SSH,
} tg_target_kind_t;

/* A label= is 1..64 printable ASCII characters other than a space. */
#define TG_TARGET_LABEL_MAX 64

typedef struct tg_target {
  tg_target_kind_t kind;
  char spec[300];     /* as given: "relay.example:7467", "ssh://u@h:22" */
  char host[256];     /* the host part, without brackets */
  char hostport[300]; /* TLS: "host:port" or "[v6]:port" to connect to */
  char user[64];      /* ssh: "" when not given */
  unsigned port;      /* TLS: the relay's port; ssh: 0 = ssh's default */
  char name[128];     /* for file names and messages: see tg_targets_name */
  char server_name[254]; /* TLS: the name its relay's certificate carries
                            (a hosts file's name=); "": the default */
  char given_label[TG_TARGET_LABEL_MAX + 1]; /* a hosts file's label=, or "" */
  /* The host's name wherever it is shown (the merged trace, the
   * collector's API and page): see tg_targets_name. */
  char label[300];
} tg_target_t;

/* Parses "host:port", "host" (port 7467), "[v6]:port", "ssh://[user@]host
 * [:port]". Writes why into |err| and returns -EINVAL when |spec| is none
 * of these. */
int tg_target_parse(const char *spec, tg_target_t *t, char *err, size_t n);

/* hosts_file.c. Appends the targets of a hosts file (one per line,
 * "HOST [name=SERVER_NAME] [label=LABEL]", '#' starts a comment, blank
 * lines skipped) to |list| (grown with realloc; |*n| entries, at most
 * |max|). Returns 0, or on the first bad line or a failed read a negative
 * error as tg_hosts_parse() or tg_read_regular_file() (common/read_file.h)
 * give it, with "FILE:LINE: why" or "cannot read the hosts file FILE: why"
 * in |err|. */
int tg_targets_load(const char *path, tg_target_t **list, size_t *n,
                    size_t max, char *err, size_t errn);
/* The same over |len| bytes of text (no NUL needed), in the line grammar
 * of common/config_text.h: 0, or -EINVAL, -E2BIG (more than |max|),
 * -ENOMEM with why in |err| and the line in *|lineno|, or -EFBIG (over
 * 4 MiB, *|lineno| 0). */
int tg_hosts_parse(const char *text, size_t len, tg_target_t **list,
                   size_t *n, size_t max, unsigned *lineno, char *err,
                   size_t errn);

/* Gives each target a file-name-safe |name|: the host, or host_port when
 * two targets share a host, with characters outside [A-Za-z0-9._-]
 * replaced by '_'; and its |label|, the name the operator knows it by: its
 * label=, else its name= (unless a wildcard), else its spec as given. A
 * name= or spec that another target's label also is gives way to the
 * spec. Returns 0, or with why in |err| -EINVAL for a duplicate target, a
 * label= given twice, or a label= that is another target's spec, -ENOMEM
 * for no memory. */
int tg_targets_name(tg_target_t *list, size_t n, char *err, size_t errn);

#endif /* TRACEGATE_CLIENT_TARGET_H */
