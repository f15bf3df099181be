/* Who may use the collector's HTTPS API (coll.h): the authorization file
 * (authz) and the revocation list (http_crl), read at start and again on
 * SIGHUP; the HTTP layer holds them and judges each connection
 * (collector/http/http.h). A file that does not load on SIGHUP leaves the
 * tables in force as they were.
 */
#include <stdio.h>

#include "auth/authz.h"
#include "auth/crl.h"
#include "collector/daemon/coll.h"
#include "collector/daemon/access.h"
#include "collector/http/http.h"
#include "common/log.h"

int coll_access_load(const tg_coll_config_t *g, tg_authz_t **authz,
                     tg_crl_t **crl, char *err, size_t errlen) {
  *authz = NULL;
  *crl = NULL;
  if (!g->https) return 0;
  if (!g->authz[0]) {
    snprintf(err, errlen, "HTTPS needs an authz file (who may observe and "
             "who may record)");
    return -1;
  }
  char why[512] = "";
  if (tg_authz_load(g->authz, authz, why, sizeof(why)) < 0) {
    snprintf(err, errlen, "authz: %s", why);
    return -1;
  }
  if (g->http_crl[0] &&
      tg_crl_load(g->http_crl, g->http_ca, crl, why, sizeof(why)) < 0) {
    snprintf(err, errlen, "http_crl: %s", why);
    tg_authz_free(*authz);
    *authz = NULL;
    return -1;
  }
  return 0;
}

void coll_access_reload(coll_t *c, const char *why) {
  if (!c->cfg.https || !c->http) return;
  tg_authz_t *authz;
  tg_crl_t *crl;
  char err[640];
  if (coll_access_load(&c->cfg, &authz, &crl, err, sizeof(err)) < 0) {
    TG_ERROR("%s: the HTTPS access tables stay as they were: %s", why, err);
    return;
  }
  int ended = tg_http_server_set_access(c->http, authz, crl);
  if (ended < 0) {
    tg_authz_free(authz);
    tg_crl_free(crl);
    return;
  }
  TG_INFO("%s: reloaded %s (%zu identities)%s%s; %d HTTPS connection(s) no "
          "longer allowed end", why, c->cfg.authz, tg_authz_count(authz),
          crl ? " and the CRL " : "", crl ? c->cfg.http_crl : "", ended);
}
