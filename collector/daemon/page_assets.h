/* The web page's files (collector/daemon/page/), embedded at build time by
 * embed.cmake into a generated page_assets.c: page.c serves them. */
#ifndef TRACEGATE_COLLECTOR_DAEMON_PAGE_ASSETS_H
#define TRACEGATE_COLLECTOR_DAEMON_PAGE_ASSETS_H

#include <stddef.h>
#include <stdio.h>

typedef struct coll_page_asset {
  const char *name;           /* its file name under page/: "app.js" */
  const unsigned char *bytes; /* |len| bytes, then a NUL not counted */
  size_t len;
} coll_page_asset_t;

/* Static, read-only. */
extern const coll_page_asset_t coll_page_assets[];
extern const size_t coll_page_n_assets;

/* The asset named |name| ("app.js"), or NULL. */
const coll_page_asset_t *coll_page_asset(const char *name);

/* Writes the page (index.html) to |f| with |ui_url| HTML-escaped at its
 * mark, and at the probe's mark "1" when coll_page_origin() takes
 * |ui_url| (the CSP then lets the page probe it), else "0". 0, or -1
 * when index.html does not have each mark exactly once. */
int coll_page_render(FILE *f, const char *ui_url);

/* The origin of |url| (an http(s) URL: ui_url) as a CSP source
 * ("https://host[:port]") into |out| (|cap| bytes): 0, or -1 when the
 * URL's scheme, host or port is not of the plain form a source allows
 * (userinfo is dropped, as an origin has none) or it does not fit. */
int coll_page_origin(char *out, size_t cap, const char *url);

/* The page's Content-Security-Policy for a UI at |ui_url| into |out|
 * (|cap| bytes; COLL_PAGE_CSP_MAX is enough for any ui_url). */
#define COLL_PAGE_CSP_MAX 1024
void coll_page_csp(char *out, size_t cap, const char *ui_url);

#endif /* TRACEGATE_COLLECTOR_DAEMON_PAGE_ASSETS_H */
