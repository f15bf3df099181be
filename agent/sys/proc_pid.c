/* /proc/<pid> parsers; see proc_pid.h. */
#include "agent/sys/proc_pid.h"

#include <string.h>

#include "agent/sys/text.h"
#include "tracegate/error.h"

static void copy_name(char *dst, const char *s, size_t n) {
  if (n >= TG_PROC_NAME_MAX) n = TG_PROC_NAME_MAX - 1;
  memcpy(dst, s, n);
  dst[n] = '\0';
}

static int parse_i32(const char **p, const char *end, int32_t *out) {
  int64_t v;
  if (tg__parse_i64(p, end, &v) < 0 || v < INT32_MIN || v > INT32_MAX)
    return TG_EPARSE;
  *out = (int32_t)v;
  return 0;
}

int tg_pid_stat_parse(const char *text, size_t len, tg_pid_stat_t *out) {
  memset(out, 0, sizeof(*out));
  const char *p = text, *end = text + len;
  if (parse_i32(&p, end, &out->pid) < 0 || out->pid <= 0) return TG_EPARSE;
  tg__skip_blanks(&p, end);
  if (p >= end || *p != '(') return TG_EPARSE;
  const char *open = p + 1, *close = NULL;
  for (const char *q = end; q > open; q--)
    if (q[-1] == ')') {
      close = q - 1;
      break;
    }
  if (!close) return TG_EPARSE;
  copy_name(out->comm, open, (size_t)(close - open));
  p = close + 1;
  const char *w;
  size_t wn;
  if (!tg__next_word(&p, end, &w, &wn) || wn != 1) return TG_EPARSE;
  out->state = w[0];
  /* Fields 4..22; 5..13 and 16..19, 21 are read only to move on. */
  for (int field = 4; field <= 22; field++) {
    int64_t v;
    if (tg__parse_i64(&p, end, &v) < 0) return TG_EPARSE;
    switch (field) {
      case 4:
        if (v < 0 || v > INT32_MAX) return TG_EPARSE;
        out->ppid = (int32_t)v;
        break;
      case 14:
      case 15:
      case 22:
        if (v < 0) return TG_EPARSE;
        if (field == 14) out->utime = (uint64_t)v;
        if (field == 15) out->stime = (uint64_t)v;
        if (field == 22) out->starttime = (uint64_t)v;
        break;
      case 20:
        out->num_threads = v;
        break;
      default:
        break;
    }
  }
  /* Field 22 must end where a blank or the text ends, not mid-number. */
  if (p < end && *p != ' ' && *p != '\n') return TG_EPARSE;
  return 0;
}

/* "Key:\tvalue" lines whose value is "<n> kB". */
static const struct {
  const char *key;
  unsigned bit;
  size_t off;
} kb_keys[] = {
    {"VmSize", TG_PID_STATUS_VM_SIZE, offsetof(tg_pid_status_t, vm_size_kb)},
    {"VmRSS", TG_PID_STATUS_VM_RSS, offsetof(tg_pid_status_t, vm_rss_kb)},
    {"RssAnon", TG_PID_STATUS_RSS_ANON, offsetof(tg_pid_status_t, rss_anon_kb)},
    {"RssFile", TG_PID_STATUS_RSS_FILE, offsetof(tg_pid_status_t, rss_file_kb)},
    {"RssShmem", TG_PID_STATUS_RSS_SHMEM,
     offsetof(tg_pid_status_t, rss_shmem_kb)},
    {"VmSwap", TG_PID_STATUS_VM_SWAP, offsetof(tg_pid_status_t, vm_swap_kb)},
    {"VmLck", TG_PID_STATUS_VM_LOCKED, offsetof(tg_pid_status_t, vm_locked_kb)},
    {"VmHWM", TG_PID_STATUS_VM_HWM, offsetof(tg_pid_status_t, vm_hwm_kb)},
};

static int parse_kb(const char *p, const char *end, uint64_t *out) {
  bool kb;
  if (tg__parse_kb(p, end, out, &kb) < 0 || !kb) return TG_EPARSE;
  return 0;
}

static int parse_id_line(const char *p, const char *end, int32_t *out) {
  if (parse_i32(&p, end, out) < 0 || *out < 0) return TG_EPARSE;
  return 0;
}

int tg_pid_status_parse(const char *text, size_t len, tg_pid_status_t *out) {
  memset(out, 0, sizeof(*out));
  tg__text_t t;
  tg__text_init(&t, text, len);
  tg__text_field_t f;
  int more;
  while ((more = tg__text_next_field(&t, &f)) == 1) {
    const char *key = f.key, *p = f.value, *end = f.end;
    size_t kn = f.key_len;
    int rv = 0;
    if (tg__word_is(key, kn, "Name")) {
      /* One tab, then the name verbatim (it may contain blanks). */
      if (p < end && *p == '\t') p++;
      copy_name(out->name, p, (size_t)(end - p));
      out->present |= TG_PID_STATUS_NAME;
    } else if (tg__word_is(key, kn, "Pid")) {
      rv = parse_id_line(p, end, &out->pid);
      out->present |= TG_PID_STATUS_PID;
    } else if (tg__word_is(key, kn, "Tgid")) {
      rv = parse_id_line(p, end, &out->tgid);
      out->present |= TG_PID_STATUS_TGID;
    } else if (tg__word_is(key, kn, "PPid")) {
      rv = parse_id_line(p, end, &out->ppid);
      out->present |= TG_PID_STATUS_PPID;
    } else if (tg__word_is(key, kn, "Uid")) {
      /* real, effective, saved, filesystem: the first one. uid_t is
       * unsigned; ProcessTree.uid is int32, as in Perfetto. */
      uint64_t uid = 0;
      rv = tg__parse_u64(&p, end, &uid);
      if (rv == 0 && uid > UINT32_MAX) rv = TG_EPARSE;
      out->uid = (int32_t)(uint32_t)uid;
      out->present |= TG_PID_STATUS_UID;
    } else {
      for (size_t i = 0; i < sizeof(kb_keys) / sizeof(kb_keys[0]); i++) {
        if (!tg__word_is(key, kn, kb_keys[i].key)) continue;
        rv = parse_kb(p, end, (uint64_t *)((char *)out + kb_keys[i].off));
        out->present |= kb_keys[i].bit;
        break;
      }
    }
    if (rv < 0) return rv;
  }
  if (more < 0) return more;
  return (out->present & TG_PID_STATUS_PID) && out->pid > 0 ? 0 : TG_EPARSE;
}

/* One integer in [lo, hi], then at most a newline and blanks. */
static int parse_one_int(const char *text, size_t len, int64_t lo, int64_t hi,
                         int64_t *out) {
  const char *p = text, *end = text + len;
  int64_t v;
  if (tg__parse_i64(&p, end, &v) < 0 || v < lo || v > hi) return TG_EPARSE;
  if (p < end && *p == '\n') p++;
  if (!tg__only_blanks(p, end)) return TG_EPARSE;
  *out = v;
  return 0;
}

int tg_oom_score_adj_parse(const char *text, size_t len, int64_t *out) {
  return parse_one_int(text, len, -1000, 1000, out);
}

int tg_ns_last_pid_parse(const char *text, size_t len, int64_t *out) {
  return parse_one_int(text, len, 0, INT32_MAX, out);
}

size_t tg_pids_new(const int32_t *prev, size_t n_prev, const int32_t *cur,
                   size_t n_cur, int32_t *out_new) {
  size_t i = 0, j = 0, k = 0;
  while (j < n_cur) {
    if (i < n_prev && prev[i] < cur[j]) {
      i++;
    } else if (i < n_prev && prev[i] == cur[j]) {
      i++;
      j++;
    } else {
      out_new[k++] = cur[j++];
    }
  }
  return k;
}

int tg_smaps_rollup_parse(const char *text, size_t len,
                          tg_smaps_rollup_t *out) {
  static const struct {
    const char *key;
    size_t off;
  } keys[] = {
      {"Rss", offsetof(tg_smaps_rollup_t, rss_kb)},
      {"Pss", offsetof(tg_smaps_rollup_t, pss_kb)},
      {"Pss_Anon", offsetof(tg_smaps_rollup_t, pss_anon_kb)},
      {"Pss_File", offsetof(tg_smaps_rollup_t, pss_file_kb)},
      {"Pss_Shmem", offsetof(tg_smaps_rollup_t, pss_shmem_kb)},
      {"SwapPss", offsetof(tg_smaps_rollup_t, swap_pss_kb)},
  };
  memset(out, 0, sizeof(*out));
  tg__text_t t;
  tg__text_init(&t, text, len);
  tg__text_field_t f;
  int more;
  bool has_rss = false;
  /* The first line is the mapping header ("start-end ---p 0 00:00 0
   * [rollup]"): its "key" matches nothing and is skipped. */
  while ((more = tg__text_next_field(&t, &f)) == 1) {
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
      if (!tg__word_is(f.key, f.key_len, keys[i].key)) continue;
      int rv = parse_kb(f.value, f.end, (uint64_t *)((char *)out + keys[i].off));
      if (rv < 0) return rv;
      if (i == 0) has_rss = true;
      break;
    }
  }
  if (more < 0) return more;
  return has_rss ? 0 : TG_EPARSE;
}
