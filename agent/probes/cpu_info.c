/* "linux.system_info"'s CPU description: see cpu_info.h. */
#include "agent/probes/cpu_info.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/sys/proc_read.h"
#include "agent/sys/text.h"
#include "tracegate/error.h"

/* TracePacket and CpuInfo (proto/trace/system_info/cpu_info.proto). */
enum { PACKET_TIMESTAMP = 8, PACKET_CPU_INFO = 67 };
enum { CPUINFO_CPUS = 1 };
enum { CPU_PROCESSOR = 1, CPU_FREQUENCIES = 2, CPU_CAPACITY = 3, CPU_ARM = 4 };
enum {
  ARM_IMPLEMENTER = 1,
  ARM_ARCHITECTURE = 2,
  ARM_VARIANT = 3,
  ARM_PART = 4,
  ARM_REVISION = 5,
};

static bool key_is(const tg__text_field_t *f, const char *k) {
  /* /proc/cpuinfo pads keys with tabs before the colon. */
  size_t n = f->key_len;
  while (n && (f->key[n - 1] == ' ' || f->key[n - 1] == '\t')) n--;
  return n == strlen(k) && !memcmp(f->key, k, n);
}

static void trim(const char **p, const char **end) {
  while (*p < *end && (**p == ' ' || **p == '\t')) (*p)++;
  while (*end > *p && ((*end)[-1] == ' ' || (*end)[-1] == '\t' ||
                       (*end)[-1] == '\r'))
    (*end)--;
}

static void copy_name(char dst[TG_CPU_INFO_NAME_MAX], const char *p,
                      const char *end) {
  trim(&p, &end);
  size_t n = (size_t)(end - p);
  if (n >= TG_CPU_INFO_NAME_MAX) n = TG_CPU_INFO_NAME_MAX - 1;
  memcpy(dst, p, n);
  dst[n] = 0;
}

/* "0x41", "8", "0xd0b": hex with 0x, else decimal; at most 32 bits. */
static bool parse_num(const char *p, const char *end, uint32_t *out) {
  trim(&p, &end);
  int base = 10;
  if (end - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    base = 16;
    p += 2;
  }
  if (p == end) return false;
  uint64_t v = 0;
  for (; p < end; p++) {
    int d = *p >= '0' && *p <= '9'                  ? *p - '0'
            : base == 16 && *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
            : base == 16 && *p >= 'A' && *p <= 'F' ? *p - 'A' + 10
                                                   : -1;
    if (d < 0) return false;
    v = v * (uint64_t)base + (uint64_t)d;
    if (v > UINT32_MAX) return false;
  }
  *out = (uint32_t)v;
  return true;
}

static int grow(tg_cpu_info_t *ci, uint32_t n) {
  if (n <= ci->n) return 0;
  tg_cpu_desc_t *g = realloc(ci->cpus, n * sizeof(*g));
  if (!g) return -ENOMEM;
  memset(g + ci->n, 0, (n - ci->n) * sizeof(*g));
  ci->cpus = g;
  ci->n = n;
  return 0;
}

int tg_cpu_info_parse(const char *text, size_t len, tg_cpu_info_t *out) {
  memset(out, 0, sizeof(*out));
  tg__text_t t;
  tg__text_init(&t, text, len);
  tg__text_field_t f;
  tg_cpu_desc_t *cur = NULL;
  char shared[TG_CPU_INFO_NAME_MAX] = ""; /* ARM's one "Processor" line */
  int rv;
  while ((rv = tg__text_next_field(&t, &f)) == 1) {
    if (key_is(&f, "processor")) {
      uint32_t n;
      if (!parse_num(f.value, f.end, &n) || n >= TG_CPU_INFO_MAX_CPUS) {
        rv = TG_EPARSE; /* (ARM's "Processor", capital P, is a name) */
        break;
      }
      if ((rv = grow(out, n + 1)) < 0) break;
      cur = &out->cpus[n];
      cur->present = true;
      continue;
    }
    bool name = key_is(&f, "model name") || key_is(&f, "cpu model") ||
                key_is(&f, "Processor");
    if (name && !cur) {
      copy_name(shared, f.value, f.end);
      continue;
    }
    if (!cur) continue;
    if (name && !cur->processor[0]) copy_name(cur->processor, f.value, f.end);
    uint32_t v;
    if (key_is(&f, "CPU implementer") && parse_num(f.value, f.end, &v)) {
      cur->arm_implementer = v;
      cur->has_arm = true;
    } else if (key_is(&f, "CPU architecture") && parse_num(f.value, f.end, &v)) {
      cur->arm_architecture = v;
      cur->has_arm = true;
    } else if (key_is(&f, "CPU variant") && parse_num(f.value, f.end, &v)) {
      cur->arm_variant = v;
      cur->has_arm = true;
    } else if (key_is(&f, "CPU part") && parse_num(f.value, f.end, &v)) {
      cur->arm_part = v;
      cur->has_arm = true;
    } else if (key_is(&f, "CPU revision") && parse_num(f.value, f.end, &v)) {
      cur->arm_revision = v;
      cur->has_arm = true;
    }
  }
  if (rv == 0 && out->n == 0) rv = TG_EPARSE;
  if (rv < 0) {
    tg_cpu_info_free(out);
    return rv;
  }
  for (uint32_t i = 0; i < out->n; i++)
    if (out->cpus[i].present && !out->cpus[i].processor[0])
      memcpy(out->cpus[i].processor, shared, sizeof(shared));
  return 0;
}

int tg_cpu_info_parse_freqs(const char *text, size_t len, tg_cpu_desc_t *d) {
  const char *p = text, *end = text + len;
  d->n_freqs = 0;
  const char *w;
  size_t n;
  while (tg__next_word(&p, end, &w, &n)) {
    if (n == 1 && w[0] == '\n') continue;
    uint32_t v;
    const char *we = w + n;
    while (we > w && (we[-1] == '\n' || we[-1] == '\r')) we--;
    if (we == w) continue;
    if (!parse_num(w, we, &v) || d->n_freqs == TG_CPU_INFO_MAX_FREQS)
      return TG_EPARSE;
    d->freqs_khz[d->n_freqs++] = v;
  }
  return 0;
}

void tg_cpu_info_free(tg_cpu_info_t *ci) {
  free(ci->cpus);
  ci->cpus = NULL;
  ci->n = 0;
}

void tg_cpu_info_write(tg_pbw_t *w, uint64_t ts, const tg_cpu_info_t *ci) {
  tg_pbw_append_varint(w, PACKET_TIMESTAMP, ts);
  tg_pbw_begin_nested(w, PACKET_CPU_INFO);
  for (uint32_t i = 0; i < ci->n; i++) {
    const tg_cpu_desc_t *d = &ci->cpus[i];
    /* One entry per CPU number, in order: trace_processor numbers the
     * entries as the CPUs. A gap (offline, not listed) stays empty. */
    tg_pbw_begin_nested(w, CPUINFO_CPUS);
    tg_pbw_append_string(w, CPU_PROCESSOR, d->processor);
    for (uint32_t k = 0; k < d->n_freqs; k++)
      tg_pbw_append_varint(w, CPU_FREQUENCIES, d->freqs_khz[k]);
    if (d->capacity) tg_pbw_append_varint(w, CPU_CAPACITY, d->capacity);
    if (d->has_arm) {
      tg_pbw_begin_nested(w, CPU_ARM);
      tg_pbw_append_varint(w, ARM_IMPLEMENTER, d->arm_implementer);
      tg_pbw_append_varint(w, ARM_ARCHITECTURE, d->arm_architecture);
      tg_pbw_append_varint(w, ARM_VARIANT, d->arm_variant);
      tg_pbw_append_varint(w, ARM_PART, d->arm_part);
      tg_pbw_append_varint(w, ARM_REVISION, d->arm_revision);
      tg_pbw_end_nested(w);
    }
    tg_pbw_end_nested(w);
  }
  tg_pbw_end_nested(w);
}

int tg_cpu_info_read(const char *proc_cpuinfo, const char *sys,
                     tg_cpu_info_t *out) {
  tg_buf_t b;
  tg_buf_init(&b, 1u << 20);
  int rv = tg_proc_read_file(proc_cpuinfo, &b);
  if (rv == 0) rv = tg_cpu_info_parse((const char *)tg_buf_begin(&b),
                                      tg_buf_size(&b), out);
  for (uint32_t i = 0; rv == 0 && i < out->n; i++) {
    char path[512];
    snprintf(path, sizeof(path), "%s/cpu%u/cpufreq/scaling_available_frequencies",
             sys, i);
    if (tg_proc_read_file(path, &b) == 0)
      (void)tg_cpu_info_parse_freqs((const char *)tg_buf_begin(&b),
                                    tg_buf_size(&b), &out->cpus[i]);
    snprintf(path, sizeof(path), "%s/cpu%u/cpu_capacity", sys, i);
    tg_cpu_desc_t one = {0};
    if (tg_proc_read_file(path, &b) == 0 &&
        tg_cpu_info_parse_freqs((const char *)tg_buf_begin(&b),
                                tg_buf_size(&b), &one) == 0 &&
        one.n_freqs == 1)
      out->cpus[i].capacity = one.freqs_khz[0];
  }
  tg_buf_free(&b);
  return rv;
}
