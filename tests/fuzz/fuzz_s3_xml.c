/* Fuzzes the reader of S3's XML answers (collector/s3/s3_xml.h): a gateway's
 * bytes, or those of anything answering at the configured endpoint.
 *
 * Input: the answer, all of it.
 *
 * Invariants (trap on violation):
 * - every string filled in is NUL-terminated within its field;
 * - an item handed to the callback has a key of at most TG_S3_KEY_MAX
 *   bytes, and exactly one of object or upload is set;
 * - a parse that succeeded named its root element;
 * - the callback's nonzero value stops the parse and is returned.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/s3/s3_xml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void terminated(const char *s, size_t cap) {
  if (!memchr(s, '\0', cap)) __builtin_trap();
}

typedef struct seen {
  unsigned items;
  unsigned stop_at;
} seen_t;

static int on_item(void *ctx, const tg_s3_object_t *o, const tg_s3_upload_t *u) {
  seen_t *s = ctx;
  if (!!o == !!u) __builtin_trap();
  const char *key = o ? o->key : u->key;
  if (strlen(key) > TG_S3_KEY_MAX) __builtin_trap();
  if (u && strlen(u->upload_id) >= TG_S3_UPLOAD_ID_MAX) __builtin_trap();
  if (o && strlen(o->etag) >= TG_S3_ETAG_MAX) __builtin_trap();
  if (++s->items == s->stop_at) return 12345;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_s3_xml_t x;
  seen_t s = {0, 0};
  int rc = tg_s3_xml_parse(data, size, &x, on_item, &s);
  terminated(x.root, sizeof x.root);
  terminated(x.code, sizeof x.code);
  terminated(x.message, sizeof x.message);
  terminated(x.upload_id, sizeof x.upload_id);
  terminated(x.etag, sizeof x.etag);
  terminated(x.next_token, sizeof x.next_token);
  terminated(x.next_key_marker, sizeof x.next_key_marker);
  terminated(x.next_upload_marker, sizeof x.next_upload_marker);
  if (rc == 0 && !x.root[0]) __builtin_trap();
  if (rc == 12345) __builtin_trap(); /* never asked to stop */
  /* Again, stopping at the first item: the parse returns the value. */
  if (rc == 0 && s.items) {
    seen_t t = {0, 1};
    if (tg_s3_xml_parse(data, size, &x, on_item, &t) != 12345) __builtin_trap();
  }
  return 0;
}
