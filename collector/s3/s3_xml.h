/* The XML answers of S3's API, read with libexpat: what the client needs
 * of an Error, a ListObjectsV2 page, a multipart upload's initiation and
 * completion, and a ListMultipartUploads page. The text is the gateway's,
 * hence untrusted: every field is bounded (a longer one fails the whole
 * answer with -EIO), nesting is bounded, a DOCTYPE (and with it any
 * entity) is refused. Also fuzzed (fuzz_s3_xml). */
#ifndef TRACEGATE_COLLECTOR_S3_S3_XML_H
#define TRACEGATE_COLLECTOR_S3_S3_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/s3/s3_client.h"

#define TG_S3_XML_CODE_MAX 64
#define TG_S3_XML_MESSAGE_MAX 256
#define TG_S3_XML_TOKEN_MAX 1024

typedef struct tg_s3_xml {
  char root[64]; /* the root element's name: "Error", "ListBucketResult" */
  char code[TG_S3_XML_CODE_MAX];       /* Error: Code */
  char message[TG_S3_XML_MESSAGE_MAX]; /* Error: Message */
  char upload_id[TG_S3_UPLOAD_ID_MAX]; /* InitiateMultipartUploadResult */
  char etag[TG_S3_ETAG_MAX];           /* CompleteMultipartUploadResult */
  bool truncated;                      /* IsTruncated */
  char next_token[TG_S3_XML_TOKEN_MAX];     /* NextContinuationToken */
  char next_key_marker[TG_S3_KEY_MAX + 1];  /* NextKeyMarker */
  char next_upload_marker[TG_S3_UPLOAD_ID_MAX]; /* NextUploadIdMarker */
} tg_s3_xml_t;

/* Called for each Contents of a ListBucketResult (|o|) or each Upload of a
 * ListMultipartUploadsResult (|u|), in document order; the other is NULL.
 * Nonzero stops the parse and is returned. May be NULL. */
typedef int (*tg_s3_xml_item_fn)(void *ctx, const tg_s3_object_t *o,
                                 const tg_s3_upload_t *u);

/* Parses |n| bytes of |p_untrusted| into *out (zeroed first). 0, -EIO (not
 * well-formed XML, a field too long or malformed, too deep, a DOCTYPE),
 * -ENOMEM, or the callback's value. */
int tg_s3_xml_parse(const void *p_untrusted, size_t n, tg_s3_xml_t *out,
                    tg_s3_xml_item_fn fn, void *ctx);

#endif /* TRACEGATE_COLLECTOR_S3_S3_XML_H */
