// SPDX-License-Identifier: Apache-2.0
/* S3's XML answers (s3_xml.h). The parser keeps the path of open elements
 * (by a small id per name it knows, UNKNOWN for the rest) and the text of
 * the innermost one; at each element's end it files the text where the
 * path says it belongs. Names are compared without a namespace: S3 writes
 * its default namespace as an attribute, which expat without namespace
 * processing leaves out of the names. */
#include "collector/s3/s3_xml.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <expat.h>

#define MAX_DEPTH 8
/* The longest text of one element: a key is at most TG_S3_KEY_MAX bytes,
 * and the tokens and markers are below that. */
#define TEXT_MAX (TG_S3_XML_TOKEN_MAX + 1)

typedef enum el {
  EL_UNKNOWN,
  EL_CODE,
  EL_MESSAGE,
  EL_UPLOAD_ID,
  EL_ETAG,
  EL_IS_TRUNCATED,
  EL_NEXT_TOKEN,
  EL_NEXT_KEY_MARKER,
  EL_NEXT_UPLOAD_MARKER,
  EL_CONTENTS,
  EL_UPLOAD,
  EL_KEY,
  EL_SIZE,
} el_t;

static const struct {
  const char *name;
  el_t el;
} names[] = {
    {"Code", EL_CODE},
    {"Message", EL_MESSAGE},
    {"UploadId", EL_UPLOAD_ID},
    {"ETag", EL_ETAG},
    {"IsTruncated", EL_IS_TRUNCATED},
    {"NextContinuationToken", EL_NEXT_TOKEN},
    {"NextKeyMarker", EL_NEXT_KEY_MARKER},
    {"NextUploadIdMarker", EL_NEXT_UPLOAD_MARKER},
    {"Contents", EL_CONTENTS},
    {"Upload", EL_UPLOAD},
    {"Key", EL_KEY},
    {"Size", EL_SIZE},
};

typedef struct parse {
  XML_Parser p;
  tg_s3_xml_t *out;
  tg_s3_xml_item_fn fn;
  void *ctx;
  int rc; /* the first error; the parser is stopped once it is set */
  el_t path[MAX_DEPTH];
  unsigned depth;
  char text[TEXT_MAX];
  size_t text_len;
  bool text_over;
  /* The item being read (Contents or Upload). */
  char key[TG_S3_KEY_MAX + 1];
  char item_etag[TG_S3_ETAG_MAX];
  char item_upload[TG_S3_UPLOAD_ID_MAX];
  uint64_t size;
  bool has_key, has_size, has_upload;
} parse_t;

static void stop(parse_t *ps, int rc) {
  if (!ps->rc) ps->rc = rc;
  XML_StopParser(ps->p, XML_FALSE);
}

static el_t el_of(const char *name) {
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(names[i].name, name) == 0) return names[i].el;
  return EL_UNKNOWN;
}

static void XMLCALL on_start(void *ud, const XML_Char *name,
                             const XML_Char **attrs) {
  (void)attrs;
  parse_t *ps = ud;
  if (ps->rc) return;
  if (ps->depth == 0) {
    size_t n = strlen(name);
    if (n >= sizeof ps->out->root) {
      stop(ps, -EIO);
      return;
    }
    memcpy(ps->out->root, name, n + 1);
  }
  if (ps->depth >= MAX_DEPTH) {
    stop(ps, -EIO);
    return;
  }
  el_t el = el_of(name);
  ps->path[ps->depth++] = el;
  ps->text_len = 0;
  ps->text_over = false;
  if (ps->depth == 2 && (el == EL_CONTENTS || el == EL_UPLOAD)) {
    ps->has_key = ps->has_size = ps->has_upload = false;
    ps->item_etag[0] = '\0';
    ps->size = 0;
  }
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len) {
  parse_t *ps = ud;
  if (ps->rc || len <= 0) return;
  if ((size_t)len > sizeof ps->text - 1 - ps->text_len) {
    ps->text_over = true;
    return;
  }
  memcpy(ps->text + ps->text_len, s, (size_t)len);
  ps->text_len += (size_t)len;
}

/* Copies the element's text into |dst| (NUL-terminated); -EIO when it does
 * not fit or holds a NUL. */
static int take(parse_t *ps, char *dst, size_t cap) {
  if (ps->text_over || ps->text_len >= cap ||
      memchr(ps->text, '\0', ps->text_len))
    return -EIO;
  memcpy(dst, ps->text, ps->text_len);
  dst[ps->text_len] = '\0';
  return 0;
}

static int parse_u64(const char *s, uint64_t *v) {
  if (!*s || strlen(s) > 20) return -EIO;
  uint64_t x = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return -EIO;
    unsigned d = (unsigned)(*p - '0');
    if (x > (UINT64_MAX - d) / 10) return -EIO;
    x = x * 10 + d;
  }
  *v = x;
  return 0;
}

/* The text of a leaf, filed by where it is: depth 2 is a field of the
 * root, depth 3 a field of an item. */
static int file_leaf(parse_t *ps, el_t el) {
  tg_s3_xml_t *o = ps->out;
  if (ps->depth == 2) {
    switch (el) {
      case EL_CODE: return take(ps, o->code, sizeof o->code);
      case EL_MESSAGE:
        /* A long message is cut, not refused: it is only shown. */
        if (ps->text_len >= sizeof o->message) ps->text_len = sizeof o->message - 1;
        ps->text_over = false;
        return take(ps, o->message, sizeof o->message);
      case EL_UPLOAD_ID: return take(ps, o->upload_id, sizeof o->upload_id);
      case EL_ETAG: return take(ps, o->etag, sizeof o->etag);
      case EL_IS_TRUNCATED: {
        char b[8];
        int rc = take(ps, b, sizeof b);
        if (rc) return rc;
        if (strcmp(b, "true") == 0) o->truncated = true;
        else if (strcmp(b, "false") == 0) o->truncated = false;
        else return -EIO;
        return 0;
      }
      case EL_NEXT_TOKEN: return take(ps, o->next_token, sizeof o->next_token);
      case EL_NEXT_KEY_MARKER:
        return take(ps, o->next_key_marker, sizeof o->next_key_marker);
      case EL_NEXT_UPLOAD_MARKER:
        return take(ps, o->next_upload_marker, sizeof o->next_upload_marker);
      default: return 0;
    }
  }
  if (ps->depth == 3 &&
      (ps->path[1] == EL_CONTENTS || ps->path[1] == EL_UPLOAD)) {
    int rc = 0;
    switch (el) {
      case EL_KEY:
        rc = take(ps, ps->key, sizeof ps->key);
        ps->has_key = rc == 0;
        return rc;
      case EL_SIZE: {
        char b[24];
        if ((rc = take(ps, b, sizeof b)) || (rc = parse_u64(b, &ps->size)))
          return -EIO;
        ps->has_size = true;
        return 0;
      }
      case EL_ETAG: return take(ps, ps->item_etag, sizeof ps->item_etag);
      case EL_UPLOAD_ID:
        rc = take(ps, ps->item_upload, sizeof ps->item_upload);
        ps->has_upload = rc == 0;
        return rc;
      default: return 0;
    }
  }
  return 0;
}

static void XMLCALL on_end(void *ud, const XML_Char *name) {
  (void)name;
  parse_t *ps = ud;
  if (ps->rc || ps->depth == 0) return;
  el_t el = ps->path[ps->depth - 1];
  int rc = 0;
  if (ps->depth == 2 && el == EL_CONTENTS &&
      strcmp(ps->out->root, "ListBucketResult") == 0) {
    if (!ps->has_key || !ps->has_size) rc = -EIO;
    else if (ps->fn) {
      tg_s3_object_t obj = {.key = ps->key, .size = ps->size,
                            .etag = ps->item_etag};
      rc = ps->fn(ps->ctx, &obj, NULL);
    }
  } else if (ps->depth == 2 && el == EL_UPLOAD &&
             strcmp(ps->out->root, "ListMultipartUploadsResult") == 0) {
    if (!ps->has_key || !ps->has_upload) rc = -EIO;
    else if (ps->fn) {
      tg_s3_upload_t up = {.key = ps->key, .upload_id = ps->item_upload};
      rc = ps->fn(ps->ctx, NULL, &up);
    }
  } else {
    rc = file_leaf(ps, el);
  }
  ps->depth--;
  ps->text_len = 0;
  ps->text_over = false;
  if (rc) stop(ps, rc);
}

static void XMLCALL on_doctype(void *ud, const XML_Char *name,
                               const XML_Char *sysid, const XML_Char *pubid,
                               int has_internal_subset) {
  (void)name, (void)sysid, (void)pubid, (void)has_internal_subset;
  stop(ud, -EIO);
}

int tg_s3_xml_parse(const void *p_untrusted, size_t n, tg_s3_xml_t *out,
                    tg_s3_xml_item_fn fn, void *ctx) {
  memset(out, 0, sizeof *out);
  if (n > INT32_MAX) return -EIO;
  parse_t *ps = calloc(1, sizeof *ps);
  if (!ps) return -ENOMEM;
  ps->p = XML_ParserCreate("UTF-8");
  if (!ps->p) {
    free(ps);
    return -ENOMEM;
  }
  ps->out = out;
  ps->fn = fn;
  ps->ctx = ctx;
  XML_SetUserData(ps->p, ps);
  XML_SetElementHandler(ps->p, on_start, on_end);
  XML_SetCharacterDataHandler(ps->p, on_text);
  XML_SetStartDoctypeDeclHandler(ps->p, on_doctype);
  XML_SetParamEntityParsing(ps->p, XML_PARAM_ENTITY_PARSING_NEVER);
  enum XML_Status st = XML_Parse(ps->p, p_untrusted, (int)n, XML_TRUE);
  int rc = ps->rc;
  if (!rc && st != XML_STATUS_OK) rc = -EIO;
  if (!rc && !out->root[0]) rc = -EIO;
  XML_ParserFree(ps->p);
  free(ps);
  return rc;
}
