/* perf_event_attr of a PerfEventConfig: see perf_events.h. */
#include "agent/perf/perf_events.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/sys/proc_read.h"

int tg_perf_event_resolve(tg_perf_event_t *ev, const char *tracefs_root) {
  if (ev->kind != TG_PERF_EVENT_TRACEPOINT) return 0;
  if (!ev->tp_name || !tracefs_root) return -ENOENT;
  /* The config reader let through only "group<:|/>name" of safe
   * characters: no part can climb out of events/. */
  size_t sep = strcspn(ev->tp_name, ":/");
  if (!ev->tp_name[sep]) return -ENOENT;
  char path[640];
  int n = snprintf(path, sizeof(path), "%s/events/%.*s/%s/id", tracefs_root,
                   (int)sep, ev->tp_name, ev->tp_name + sep + 1);
  if (n < 0 || (size_t)n >= sizeof(path)) return -ENAMETOOLONG;
  char buf[32];
  long got = tg_proc_read_head(path, buf, sizeof(buf));
  if (got < 0) return got == -ENOTDIR ? -ENOENT : (int)got;
  char *end;
  errno = 0;
  unsigned long long id = strtoull(buf, &end, 10);
  if (end == buf || errno || (*end && *end != '\n') || !id) return -EBADMSG;
  ev->attr_config = id;
  return 0;
}

int tg_perf_cfg_resolve(tg_perf_cfg_t *c, const char *tracefs_root,
                        const tg_perf_event_t **failed) {
  *failed = NULL;
  int rv = tg_perf_event_resolve(&c->timebase, tracefs_root);
  if (rv < 0) {
    *failed = &c->timebase;
    return rv;
  }
  c->attr_config = c->timebase.attr_config;
  for (size_t i = 0; i < c->n_followers; i++)
    if ((rv = tg_perf_event_resolve(&c->followers[i], tracefs_root)) < 0) {
      *failed = &c->followers[i];
      return rv;
    }
  return 0;
}

static void set_event(const tg_perf_event_t *ev, struct perf_event_attr *a) {
  a->type = ev->attr_type;
  a->config = ev->attr_config;
  a->config1 = ev->attr_config1;
  a->config2 = ev->attr_config2;
  a->exclude_user = ev->exclude_user;
  a->exclude_kernel = ev->exclude_kernel;
  a->exclude_hv = ev->exclude_hv;
}

void tg_perf_attr_leader(const tg_perf_cfg_t *c, uint64_t sample_type,
                         struct perf_event_attr *a) {
  memset(a, 0, sizeof(*a));
  a->size = sizeof(*a);
  set_event(&c->timebase, a);
  a->disabled = 1;
  if (c->poll_period_ms) {
    /* Counting only: the group's values come from read(2). */
    a->read_format = PERF_FORMAT_GROUP;
    return;
  }
  if (c->frequency) {
    a->freq = 1;
    a->sample_freq = c->frequency;
  } else {
    a->sample_period = c->period;
  }
  a->sample_type = sample_type;
  /* Without followers the value alone, as the record parser reads it. */
  a->read_format = c->n_followers ? PERF_FORMAT_GROUP : 0;
  a->use_clockid = 1;
  a->clockid = c->clockid;
  a->sample_id_all = 1;
  if (c->callstacks) {
    a->exclude_callchain_kernel = !c->kernel_frames;
    a->exclude_callchain_user = c->user_frames != TG_PERF_USER_FRAME_POINTER;
    /* New executable mappings and execs: a process's maps are read again. */
    a->mmap = 1;
    a->mmap2 = 1;
    a->comm = 1;
    a->comm_exec = 1;
  }
}

void tg_perf_attr_follower(const tg_perf_cfg_t *c, size_t i,
                           const struct perf_event_attr *leader,
                           struct perf_event_attr *a) {
  memset(a, 0, sizeof(*a));
  a->size = sizeof(*a);
  if (i >= c->n_followers) return;
  set_event(&c->followers[i], a);
  a->disabled = 0; /* counts while the leader is enabled */
  /* A follower is read with its leader's samples and never samples
   * itself: the user registers and stack a DWARF leader copies are not
   * asked of it (the kernel refuses PERF_SAMPLE_REGS_USER with no
   * register mask). */
  a->sample_type = leader->sample_type &
                   ~(uint64_t)(PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER);
  a->use_clockid = leader->use_clockid;
  a->clockid = leader->clockid;
}
