/* An exchange's life (http_internal.h): its one state setter, and its
 * end when the connection loses it or it is done. Used by http.c,
 * http_conn.c and http_respond.c; below them all, it calls none of them,
 * so the server's files call one way (http.c -> http_conn.c,
 * http_respond.c -> here).
 */
#include <stdlib.h>
#include <unistd.h>

#include "collector/http/http_internal.h"
#include "common/log.h"

static const char *x_state_name(tg_http_x_state_t s) {
  switch (s) {
    case TG_HTTP_X_READING: return "reading";
    case TG_HTTP_X_REFUSING: return "refusing";
    case TG_HTTP_X_OWNED: return "owned";
    case TG_HTTP_X_RESPONDING: return "responding";
  }
  return "?";
}

void tg__http_x_set(tg_http_exchange_t *x, tg_http_x_state_t to,
                    const char *why) {
  TG_DEBUG("http: %s %s: %s -> %s (%s)", x->req.method, x->req.path,
           x_state_name(x->state), x_state_name(to), why);
  x->state = to;
}

void tg__http_x_free(tg_http_exchange_t *x) {
  tg_list_remove(&x->node);
  if (x->fd >= 0) close(x->fd);
  if (x->fd2 >= 0) close(x->fd2);
  free(x->ext);
  for (size_t i = 0; i < x->n_hdrs; i++) {
    free(x->hdr_names[i]);
    free(x->hdr_values[i]);
  }
  free(x->disposition);
  free(x->content_type);
  free(x->resp);
  free(x->body);
  free(x->args);
  free(x->strings);
  free(x);
}

/* The connection lost its exchange: the client went away, lws timed it
 * out, or the context is being destroyed. The owner hears of it only if
 * the exchange is still its own. */
void tg__http_conn_drop_exchange(tg_http_conn_t *conn, const char *why) {
  tg_http_exchange_t *x = conn->x;
  if (!x) return;
  conn->x = NULL;
  tg_http_server_t *srv = x->srv;
  TG_DEBUG("http: %s %s dropped while %s: %s", x->req.method, x->req.path,
           x_state_name(x->state), why);
  if (x->state == TG_HTTP_X_OWNED) srv->on_abandon(srv->ctx_arg, x);
  tg__http_x_free(x);
}
