/* tracefs format files: the layout of one event's record, and of the ring
 * buffer page header (events/header_page).
 *
 * A format file lists each field as
 *   field:<type> <name>[<n>];  offset:<o>;  size:<s>;  signed:<0|1>;
 * and this module turns that into offsets and decoding kinds. It does no
 * I/O: callers hand in the text, which may be anything (it comes from the
 * kernel, or a fuzzer), and get a bounded description back.
 */
#ifndef TRACEGATE_PROBES_FTRACE_FORMAT_H
#define TRACEGATE_PROBES_FTRACE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/sysmacros.h>

#define TG_FTRACE_NAME_MAX 64
#define TG_FTRACE_FIELD_NAME_MAX 48
/* Real events have at most ~20 fields; the rest of a longer list is
 * dropped (the event still decodes the first ones). */
#define TG_FTRACE_MAX_FIELDS 32

typedef enum tg_ftrace_field_kind {
  TG_FTRACE_FIELD_SKIP = 0,  /* a layout we do not decode */
  TG_FTRACE_FIELD_INT,       /* scalar of 1, 2, 4 or 8 bytes */
  TG_FTRACE_FIELD_INT_ARRAY, /* fixed array of scalars: elem_size each */
  TG_FTRACE_FIELD_CHARS,     /* char name[N]: NUL-terminated within N */
  TG_FTRACE_FIELD_DATA_LOC,  /* __data_loc: u32 len<<16 | offset in record */
  TG_FTRACE_FIELD_REL_LOC,   /* __rel_loc: offset from the field's end */
  TG_FTRACE_FIELD_TAIL,      /* char buf[] of size 0: the record's tail */
  /* A pointer of 4 or 8 bytes ("void *", "struct page *", "char **"...):
   * a kernel address (Perfetto's kFtraceSymAddr32/64 for void *). Never
   * written as is: it would disclose the kernel's layout (KASLR); see
   * ftrace_kaddr.h. An array of pointers is SKIP. An unsigned integer
   * of pointer size named as a code address (ip, call_site, caller...)
   * is one too. */
  TG_FTRACE_FIELD_SYMADDR,
  /* A pointer of 4 or 8 bytes to chars ("const char *", "char *"): most
   * often a string constant of the kernel's, named in printk_formats
   * (ftrace_printk.h; Perfetto's kFtraceStringPtr). Written as that
   * string where a string is wanted (tg_ftrace_table_add decides), else
   * as a SYMADDR; never as the address. */
  TG_FTRACE_FIELD_STRPTR,
} tg_ftrace_field_kind_t;

/* What an integer field names, read from its declaration as Perfetto's
 * probes infer it, for linux.inode_file_map (inode_feed.h). */
typedef enum tg_ftrace_field_role {
  TG_FTRACE_ROLE_NONE = 0,
  /* An inode number: declared ino_t (or i_ino, Perfetto's other spelling),
   * or named ino or i_ino (filemap's "unsigned long i_ino", xfs's
   * xfs_ino_t ino); never a cgroup_* inode, which lives on cgroupfs rather
   * than on the record's device. */
  TG_FTRACE_ROLE_INODE,
  /* A dev_t: the kernel's encoding (major << 20 | minor), which the
   * encoder writes and collects as stat(2)'s st_dev
   * (tg_ftrace_dev_to_user). */
  TG_FTRACE_ROLE_DEV,
} tg_ftrace_field_role_t;

typedef struct tg_ftrace_field {
  char name[TG_FTRACE_FIELD_NAME_MAX];
  uint16_t offset;
  uint16_t size;
  uint16_t elem_size; /* TG_FTRACE_FIELD_INT_ARRAY only */
  uint8_t kind;       /* tg_ftrace_field_kind_t */
  uint8_t role;       /* tg_ftrace_field_role_t; scalars of 4 or 8 bytes */
  bool is_signed;
} tg_ftrace_field_t;

/* A dev_t of a trace record in the kernel's internal layout (MAJOR is the
 * 12 bits above 20 bits of MINOR: linux/kdev_t.h) as userspace sees the
 * same device in st_dev: makedev() of that major and minor. Only the low
 * 32 bits count; the kernel's dev_t is 32 bits wide. */
static inline uint64_t tg_ftrace_dev_to_user(uint64_t kdev) {
  uint32_t k = (uint32_t)kdev;
  return (uint64_t)makedev(k >> 20, k & 0xfffffu);
}

typedef struct tg_ftrace_format {
  char name[TG_FTRACE_NAME_MAX];
  uint32_t id;         /* the record's common_type */
  uint16_t pid_offset; /* common_pid (4 bytes); UINT16_MAX if absent */
  uint16_t flags_offset; /* common_flags (1 byte); UINT16_MAX if absent */
  uint8_t n_fields;    /* the event's own fields, without common_* */
  tg_ftrace_field_t fields[TG_FTRACE_MAX_FIELDS];
} tg_ftrace_format_t;

/* Parses an event's format file. Returns 0, or -EINVAL when the text has no
 * "ID:" line or no fields. */
int tg_ftrace_format_parse(const char *text, size_t len,
                           tg_ftrace_format_t *out);

/* The ring buffer page layout, from events/header_page. */
typedef struct tg_ftrace_page_layout {
  uint16_t commit_size; /* bytes of the commit word: 4 or 8 */
  uint16_t data_offset; /* where the records begin */
  uint32_t page_size;   /* data_offset + data size */
} tg_ftrace_page_layout_t;

/* Returns 0, or -EINVAL when a field is missing or out of range. */
int tg_ftrace_header_page_parse(const char *text, size_t len,
                                tg_ftrace_page_layout_t *out);

/* The field called |name|, or NULL. */
const tg_ftrace_field_t *tg_ftrace_format_field(const tg_ftrace_format_t *f,
                                                const char *name);

#endif /* TRACEGATE_PROBES_FTRACE_FORMAT_H */
