/* SPDX-License-Identifier: Apache-2.0 */
/* tg-test-http: one HTTP request for a test, in a child process of its
 * own (the test goes on while it waits), over libcurl:
 *
 *   tg-test-http URL METHOD OUT CA CERT KEY
 *
 * writes the answer's body to OUT, its status to OUT.status (0: no HTTP
 * answer at all, the transport's error then in OUT) and its
 * Content-Length to OUT.length (-1: none). CA, CERT and KEY are PEM
 * files, "-" for none: with CA the server is verified against it (name
 * included), with CERT and KEY the client presents them. Redirects are
 * followed, as a browser or urllib would. Exits 0 once the three files
 * are written, whatever the status; 2 on bad arguments or a file that
 * cannot be written.
 *
 * It replaced a python3 child per request (urllib), whose start cost the
 * collector tests more CPU than the collector itself (docs/operations.md,
 * "CI's time"). */
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

static size_t to_file(char *p, size_t size, size_t nmemb, void *ud) {
  return fwrite(p, size, nmemb, ud);
}

static int write_text(const char *out, const char *suffix, const char *text) {
  char path[4096];
  if ((size_t)snprintf(path, sizeof(path), "%s%s", out, suffix) >= sizeof(path))
    return -1;
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  int rv = fputs(text, f) < 0 ? -1 : 0;
  if (fclose(f) != 0) rv = -1;
  return rv;
}

static void set_method(CURL *e, const char *method, struct curl_slist **h) {
  if (!strcmp(method, "GET")) return;
  if (!strcmp(method, "HEAD")) {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    return;
  }
  if (!strcmp(method, "POST")) {
    /* An empty body, said with Content-Length: 0 (as urllib did). */
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 0L);
    return;
  }
  curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
  if (!strcmp(method, "PUT") || !strcmp(method, "PATCH"))
    *h = curl_slist_append(*h, "Content-Length: 0");
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: tg-test-http URL METHOD OUT CA CERT KEY\n");
    return 2;
  }
  const char *url = argv[1], *method = argv[2], *out = argv[3];
  const char *ca = argv[4], *cert = argv[5], *key = argv[6];
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 2;
  FILE *body = fopen(out, "wb");
  CURL *e = curl_easy_init();
  if (!body || !e) return 2;
  struct curl_slist *headers = NULL;
  char err[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, to_file);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, body);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, err);
  curl_easy_setopt(e, CURLOPT_TIMEOUT, 60L);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  if (strcmp(ca, "-") != 0) {
    curl_easy_setopt(e, CURLOPT_CAINFO, ca);
    curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
    if (strcmp(cert, "-") != 0) {
      curl_easy_setopt(e, CURLOPT_SSLCERT, cert);
      curl_easy_setopt(e, CURLOPT_SSLKEY, key);
    }
  }
  set_method(e, method, &headers);
  if (headers) curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
  CURLcode rc = curl_easy_perform(e);
  long status = 0;
  curl_off_t length = -1;
  if (rc == CURLE_OK) {
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(e, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
  }
  if (fclose(body) != 0) return 2;
  /* No HTTP answer at all: status 0, and why in the body's place. */
  if (rc != CURLE_OK &&
      write_text(out, "", err[0] ? err : curl_easy_strerror(rc)) != 0)
    return 2;
  char text[32];
  snprintf(text, sizeof(text), "%ld", status);
  if (write_text(out, ".status", text) != 0) return 2;
  snprintf(text, sizeof(text), "%lld", (long long)length);
  if (write_text(out, ".length", text) != 0) return 2;
  curl_slist_free_all(headers);
  curl_easy_cleanup(e);
  curl_global_cleanup();
  return 0;
}
