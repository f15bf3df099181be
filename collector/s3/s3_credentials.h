/* The keys the collector signs its bucket requests with: from a file
 * (s3_credentials_file), from systemd's credential
 * TG_S3_CREDENTIAL_NAME (LoadCredential=; the same text) or from the
 * environment, never from a command line or a log line.
 *
 * The file: lines "AWS_ACCESS_KEY_ID=..." and "AWS_SECRET_ACCESS_KEY=..."
 * (blanks around '=' allowed; blank lines and lines starting with '#'
 * skipped; each key once; any other key refused), at most
 * TG_S3_CREDENTIALS_FILE_MAX bytes, a regular file that neither its group
 * nor others may read or write (it holds a secret: -EPERM otherwise, as
 * ssh does for its keys). Values are 1..TG_S3_CREDENTIAL_MAX bytes of
 * printable ASCII without blanks. */
#ifndef TRACEGATE_COLLECTOR_S3_S3_CREDENTIALS_H
#define TRACEGATE_COLLECTOR_S3_S3_CREDENTIALS_H

#include <stddef.h>

#define TG_S3_CREDENTIAL_MAX 128
#define TG_S3_CREDENTIALS_FILE_MAX 4096
/* The file's name in $CREDENTIALS_DIRECTORY. */
#define TG_S3_CREDENTIAL_NAME "s3_credentials"

typedef struct tg_s3_credentials {
  char access_key[TG_S3_CREDENTIAL_MAX + 1];
  char secret_key[TG_S3_CREDENTIAL_MAX + 1]; /* wipe with ..._clear */
} tg_s3_credentials_t;

/* Parses |n| bytes of |text_untrusted|. 0, or -EINVAL with the line and
 * what is wrong in |why| (|cap| bytes; never a value). */
int tg_s3_credentials_parse(const char *text_untrusted, size_t n,
                            tg_s3_credentials_t *out, char *why, size_t cap);

/* Reads |path|. NULL or "": $CREDENTIALS_DIRECTORY/TG_S3_CREDENTIAL_NAME
 * when the variable is set and the file exists (its mode unchecked:
 * systemd keeps it to the unit's user), else AWS_ACCESS_KEY_ID and
 * AWS_SECRET_ACCESS_KEY of the environment. 0, or -EPERM (the file's
 * mode), -EINVAL (its text, or a variable missing), -EFBIG, -errno; |why|
 * says which (and for the credential, its path). */
int tg_s3_credentials_load(const char *path, tg_s3_credentials_t *out,
                           char *why, size_t cap);

/* Wipes the secret. */
void tg_s3_credentials_clear(tg_s3_credentials_t *c);

#endif /* TRACEGATE_COLLECTOR_S3_S3_CREDENTIALS_H */
