/* A session's TraceConfig: validation at EnableTracing and the producer
 * name matchers, compiled once per session.
 *
 * Owns: tg_session_matchers_t (the compiled regular expressions of
 * producer_name_regex_filter and trigger producer_name_regex), and the
 * producer filters of the session's config, which ChangeTraceConfig
 * replaces. Must never compile a pattern per match, or touch any other
 * part of the session.
 */
#ifndef TRACEGATE_SERVICE_SESSION_CONFIG_H
#define TRACEGATE_SERVICE_SESSION_CONFIG_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>

#include "pb/config/trace_config.pb-c.h"
#include "service/service.h"

/* One pattern; a pattern that does not compile, or is not compiled
 * (name_regex.h: past the limits of one pattern or of the config's
 * patterns together), matches nothing. */
typedef struct tg_name_matcher {
  regex_t re;
  bool compiled;
  bool over_budget; /* not compiled: the config's patterns past
                       TG_NAME_REGEX_MAX_CONFIG_POSITIONS */
} tg_name_matcher_t;

typedef struct tg_session_matchers {
  tg_name_matcher_t **ds_regex; /* [data source][producer_name_regex_filter] */
  size_t *n_ds_regex;           /* [data source]: patterns compiled */
  size_t n_ds;
  tg_name_matcher_t *trigger_regex; /* [trigger]; unset: any producer */
  size_t n_triggers;
} tg_session_matchers_t;

/* Checks |c| against the service's limits and sessions; |m| was compiled
 * from |c| and tells which patterns are invalid. On failure returns
 * -EINVAL or -EBUSY and a message naming the field in |err|. */
int tg__session_config_validate(tg_service_t *svc,
                                const Perfetto__Protos__TraceConfig *c,
                                const tg_session_matchers_t *m, int write_fd,
                                char *err, size_t n);
/* Compiles the matchers of |c| into |m|; 0 or -ENOMEM. A pattern that
 * does not compile, or that name_regex.h's limits keep from regcomp(), is
 * kept as such (see tg_name_matcher_t). */
int tg__session_matchers_compile(tg_session_matchers_t *m,
                                 const Perfetto__Protos__TraceConfig *c);
void tg__session_matchers_free(tg_session_matchers_t *m);
/* Whether config entry |cfg_idx| of |s| wants producer |p|. */
bool tg__session_config_producer_matches(const tg_session_t *s, size_t cfg_idx,
                                         const tg_producer_t *p);
/* Whether trigger |idx| of |s| accepts activation by producer |p|. */
bool tg__session_config_trigger_producer_ok(const tg_session_t *s, size_t idx,
                                            const tg_producer_t *p);
/* ChangeTraceConfig: takes the producer filters of |neu|'s data sources
 * for the entries of the same name (|neu| gets the old ones, to be freed
 * with it) and recompiles the matchers. 0 or -ENOMEM (nothing changed). */
int tg__session_config_change_filters(tg_session_t *s,
                                      Perfetto__Protos__TraceConfig *neu);

#endif /* TRACEGATE_SERVICE_SESSION_CONFIG_H */
