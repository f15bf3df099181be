/* Who may use the HTTPS API (access.c): the authz file and the CRL.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_ACCESS_H
#define TRACEGATE_COLLECTOR_DAEMON_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/daemon/coll.h"

struct tg_authz;
struct tg_crl;
/* The HTTPS access tables of |g| (none over plain HTTP: both NULL), the
 * caller's on success. -1 with what is wrong in |err|. */
int coll_access_load(const tg_coll_config_t *g, struct tg_authz **authz,
                     struct tg_crl **crl, char *err, size_t errlen);
/* Reads them again and hands them to the HTTP layer, which ends the
 * connections they no longer allow; on an error the old ones stay. */
void coll_access_reload(coll_t *c, const char *why);

#endif /* TRACEGATE_COLLECTOR_DAEMON_ACCESS_H */
