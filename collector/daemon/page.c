/* The web page at /, its script at /app.js and its style at /style.css
 * (api.c routes them; the files are collector/daemon/page/, embedded at
 * build time: page_assets.h): the snapshots, newest first, with their
 * trigger, hosts, size and loss; the hosts and their state; a download
 * link per snapshot, and "Open in Perfetto UI", which fetches the trace
 * and hands it to the UI through the UI's documented postMessage
 * handshake: open the UI's URL, send 'PING' until it answers 'PONG', then
 * send {perfetto: {buffer, title, fileName}} to the UI's origin (never
 * '*'). The UI's window keeps its opener: the UI takes messages only from
 * its opener (or the page that frames it), so 'noopener' would leave it
 * deaf (docs/security.md). A failed snapshot's row says why (its failure
 * text), with no hosts or size to show.
 *
 * When the UI is not there (a laptop offline, a self-hosted UI down), the
 * page says so within seconds and offers the download instead: a probe,
 * one no-cors GET of ui_url without credentials, fails at once on a
 * network error; a UI that loads but never answers PING is named after
 * a deadline (app.js: openInUi). The handshake goes on meanwhile, so a
 * UI that answers late still gets the trace.
 *
 * Besides, the page fits a 1280 px screen (fixed column widths), shows
 * times with their zone, cuts long texts (a reason, an error, a problem)
 * to their cell with the whole text on a click, names under a partial
 * snapshot's row each host that failed and why, opens a snapshot's
 * detail (its hosts, outcomes, windows, loss, data source problems, each
 * host's requests (flows started, ended, unmatched) and perf boost, the
 * snapshot's requests across hosts and symbols, a download and an Open
 * per host), shows each host's perf boost budget (used, refused, when it
 * refills), and filters the list by trigger, host
 * and state (the list's own arguments).
 *
 * The page is static; the only values put into it are the UI's URL, which
 * the config checked (http(s), no blanks, quotes or angle brackets) and
 * which is HTML-escaped here all the same, at the page's one
 * "{{ui_url}}", and, at its one "{{ui_probe}}", whether the policy lets
 * the page probe the UI ("1" or "0"). The script and the style are served
 * apart so that the Content-Security-Policy allows no inline script or
 * style at all. Its connect-src holds, beside 'self', the UI's origin
 * alone, for the probe: the operator chose that origin (the trace goes to
 * it anyway), the page's only script is ours, and a no-cors answer is
 * opaque to it. An origin that does not parse as a plain
 * scheme://host[:port] (nothing that could end a source or add a
 * directive) is left out, "{{ui_probe}}" is then "0", and the page learns
 * that the UI is missing from the deadline alone.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/daemon/coll.h"
#include "collector/daemon/api.h"
#include "collector/daemon/page_assets.h"
#include "collector/http/http.h"
#include "common/log.h"

#define UI_URL_MARK "{{ui_url}}"
/* "1" when the policy's connect-src holds the UI's origin (the probe may
 * run), else "0". */
#define UI_PROBE_MARK "{{ui_probe}}"

int coll_page_origin(char *out, size_t cap, const char *url) {
  size_t scheme = !strncmp(url, "https://", 8)  ? 8
                  : !strncmp(url, "http://", 7) ? 7
                                                : 0;
  if (!scheme) return -1;
  const char *auth = url + scheme;
  /* The authority ends where the path, query or fragment begins (a
   * browser reads a backslash as '/' in an http(s) URL). */
  size_t alen = strcspn(auth, "/?#\\");
  const char *at = memchr(auth, '@', alen);
  const char *host = auth;
  for (; at; at = memchr(host, '@', alen - (size_t)(host - auth)))
    host = at + 1;
  size_t hlen = alen - (size_t)(host - auth);
  size_t i = 0;
  if (hlen && host[0] == '[') { /* an IPv6 literal */
    for (i = 1; i < hlen && host[i] != ']'; i++)
      if (!strchr("0123456789abcdefABCDEF:.", host[i])) return -1;
    if (i == hlen || i == 1) return -1;
    i++;
  } else {
    for (; i < hlen && host[i] != ':'; i++)
      if (!((host[i] >= 'a' && host[i] <= 'z') || (host[i] >= 'A' && host[i] <= 'Z') ||
            (host[i] >= '0' && host[i] <= '9') || host[i] == '.' || host[i] == '-'))
        return -1;
    if (!i) return -1;
  }
  if (i < hlen) { /* ":port": at least one digit, at most five */
    if (host[i] != ':' || hlen - i < 2 || hlen - i > 6) return -1;
    for (size_t j = i + 1; j < hlen; j++)
      if (host[j] < '0' || host[j] > '9') return -1;
  }
  int n = snprintf(out, cap, "%.*s%.*s", (int)scheme, url, (int)hlen, host);
  return n < 0 || (size_t)n >= cap ? -1 : 0;
}

void coll_page_csp(char *out, size_t cap, const char *ui_url) {
  char origin[TG_COLL_CONFIG_URL_MAX + 1];
  bool probe = coll_page_origin(origin, sizeof(origin), ui_url) == 0;
  snprintf(out, cap,
           "default-src 'none'; script-src 'self'; style-src 'self'; "
           "connect-src 'self'%s%s; img-src 'self'; frame-ancestors 'none'; "
           "base-uri 'none'; form-action 'none'",
           probe ? " " : "", probe ? origin : "");
}

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

/* |mark| once in |html|: where, or NULL. */
static const char *once(const char *html, const char *mark) {
  const char *at = strstr(html, mark);
  return at && !strstr(at + 1, mark) ? at : NULL;
}

int coll_page_render(FILE *f, const char *ui_url) {
  const coll_page_asset_t *a = coll_page_asset("index.html");
  const char *html = a ? (const char *)a->bytes : NULL;
  /* index.html is ours: test_collector_routes checks it has each mark
   * once. */
  const char *url = html ? once(html, UI_URL_MARK) : NULL;
  const char *probe = html ? once(html, UI_PROBE_MARK) : NULL;
  if (!url || !probe) return -1;
  char origin[TG_COLL_CONFIG_URL_MAX + 1];
  const char *flag = coll_page_origin(origin, sizeof(origin), ui_url) == 0 ? "1" : "0";
  const char *first = url < probe ? url : probe;
  const char *second = url < probe ? probe : url;
  const char *p = html;
  for (const char *m = first; m; m = m == first ? second : NULL) {
    fwrite(p, 1, (size_t)(m - p), f);
    if (m == url) {
      html_escape(f, ui_url);
      p = m + strlen(UI_URL_MARK);
    } else {
      fputs(flag, f);
      p = m + strlen(UI_PROBE_MARK);
    }
  }
  fputs(p, f);
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
    TG_ERROR("web page: the embedded index.html lacks its one " UI_URL_MARK
             " or " UI_PROBE_MARK);
    tg_http_respond(x, 500, NULL, NULL, 0);
    free(buf);
    return;
  }
  char csp[COLL_PAGE_CSP_MAX];
  coll_page_csp(csp, sizeof(csp), c->cfg.ui_url);
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
