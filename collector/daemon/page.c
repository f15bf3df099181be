/* The web page at /, its script at /app.js and its style at /style.css
 * (api.c routes them; the files are collector/daemon/page/, embedded at
 * build time: page_assets.h): the snapshots, newest first, with their
 * trigger, hosts, size and loss; the hosts and their state; a download link per snapshot, and "Open in
 * Perfetto UI", which fetches the trace and hands it to the UI through the
 * UI's documented postMessage handshake: open the UI's URL, send 'PING'
 * until it answers 'PONG', then send {perfetto: {buffer, title,
 * fileName}} to the UI's origin (never '*'). The UI's window keeps its
 * opener: the UI takes messages only from its opener (or the page that
 * frames it), so 'noopener' would leave it deaf (docs/security.md). A
 * failed snapshot's row says why (its failure text), with no hosts or
 * size to show.
 *
 * The page is static; the only value put into it is the UI's URL, which
 * the config checked (http(s), no quotes or angle brackets) and which is
 * HTML-escaped here all the same, at the page's one "{{ui_url}}". The
 * script and the style are served apart so that the
 * Content-Security-Policy allows no inline script or style at all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/daemon/coll.h"
#include "collector/daemon/page_assets.h"
#include "collector/http.h"
#include "common/log.h"

#define UI_URL_MARK "{{ui_url}}"

static const char csp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'none'";

const coll_page_asset_t *coll_page_asset(const char *name) {
  for (size_t i = 0; i < coll_page_n_assets; i++)
    if (!strcmp(coll_page_assets[i].name, name)) return &coll_page_assets[i];
  return NULL;
}

static void html_escape(FILE *f, const char *s) {
  for (; *s; s++) {
    switch (*s) {
      case '&': fputs("&amp;", f); break;
      case '<': fputs("&lt;", f); break;
      case '>': fputs("&gt;", f); break;
      case '"': fputs("&quot;", f); break;
      case '\'': fputs("&#39;", f); break;
      default: fputc(*s, f);
    }
  }
}

int coll_page_render(FILE *f, const char *ui_url) {
  const coll_page_asset_t *a = coll_page_asset("index.html");
  const char *html = a ? (const char *)a->bytes : NULL;
  const char *mark = html ? strstr(html, UI_URL_MARK) : NULL;
  /* index.html is ours: test_collector_routes checks it has one mark. */
  if (!mark || strstr(mark + 1, UI_URL_MARK)) return -1;
  fwrite(html, 1, (size_t)(mark - html), f);
  html_escape(f, ui_url);
  fputs(mark + strlen(UI_URL_MARK), f);
  return 0;
}

void coll_page_send(coll_t *c, tg_http_exchange_t *x) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) {
    tg_http_respond(x, 500, NULL, NULL, 0);
    return;
  }
  int rv = coll_page_render(f, c->cfg.ui_url);
  fclose(f);
  if (rv < 0) {
    TG_ERROR("web page: the embedded index.html lacks its one " UI_URL_MARK);
    tg_http_respond(x, 500, NULL, NULL, 0);
    free(buf);
    return;
  }
  tg_http_add_header(x, "Content-Security-Policy", csp);
  tg_http_add_header(x, "X-Frame-Options", "DENY");
  if (tg_http_respond(x, 200, "text/html; charset=utf-8", buf, len) < 0)
    tg_http_respond(x, 500, NULL, NULL, 0);
  free(buf);
}

void coll_asset_send(tg_http_exchange_t *x, const char *path) {
  static const struct {
    const char *path, *name, *type;
  } served[] = {
      {"/app.js", "app.js", "text/javascript; charset=utf-8"},
      {"/style.css", "style.css", "text/css; charset=utf-8"},
  };
  for (size_t i = 0; i < sizeof(served) / sizeof(served[0]); i++) {
    if (strcmp(path, served[i].path)) continue;
    const coll_page_asset_t *a = coll_page_asset(served[i].name);
    if (!a) break;
    tg_http_respond(x, 200, served[i].type, a->bytes, a->len);
    return;
  }
  tg_http_respond(x, 404, NULL, NULL, 0);
}
