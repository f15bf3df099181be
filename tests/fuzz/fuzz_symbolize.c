/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes `tracegate symbolize`'s walk of a trace's packets
 * (consumer/symbolize/symbolize.h): the input is a Trace (its packets
 * framed as field 1), so interning, clears and machine ids carry from one
 * packet to the next.
 *
 * Every module must have a NUL-terminated path no longer than
 * TG_SYM_MAX_PATH, a build id within TG_SYM_MAX_BUILD_ID, addresses sorted
 * and unique after tg_sym_finish_collect, and its ModuleSymbols packets
 * (with made-up lines) must read back as packets. Nothing may crash or
 * leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/packet_inflate.h"
#include "consumer/symbolize/symbolize.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_packet(void *ctx, const uint8_t *pkt, size_t len) {
  /* Damaged packets end the walk as they end `tracegate symbolize`. */
  return tg_sym_packet(ctx, pkt, len) ? 1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_sym_t s;
  tg_sym_init(&s);
  tg_packets_each(data, size, on_packet, &s);
  tg_sym_finish_collect(&s);
  size_t pcs = 0;
  tg_buf_t out;
  tg_buf_init(&out, 0);
  for (size_t i = 0; i < s.n_mods; i++) {
    tg_sym_module_t *m = &s.mods[i];
    if (strlen(m->path) > TG_SYM_MAX_PATH ||
        m->build_id_len > TG_SYM_MAX_BUILD_ID)
      abort();
    for (size_t k = 1; k < m->n_pcs; k++)
      if (m->pcs[k - 1] >= m->pcs[k]) abort();
    pcs += m->n_pcs;
    /* Each address named by its module's path. */
    m->addrs = calloc(m->n_pcs ? m->n_pcs : 1, sizeof(*m->addrs));
    if (!m->addrs) continue;
    tg_sym_line_t line = {.function = m->path, .file = m->path, .line = 1};
    for (size_t k = 0; k < m->n_pcs; k++)
      m->addrs[k] = (tg_sym_addr_t){m->pcs[k], &line, 1};
    m->n_addrs = m->n_pcs;
    tg_buf_reset(&out);
    if (tg_sym_write_module(m, &out) == 0) {
      tg_sym_t back;
      tg_sym_init(&back);
      if (tg_packets_each(tg_buf_begin(&out), tg_buf_size(&out), on_packet,
                          &back) != 0)
        abort();
      size_t want = (m->n_addrs + TG_SYM_ADDRS_PER_PACKET - 1) /
                    TG_SYM_ADDRS_PER_PACKET;
      if (back.module_symbols_in != want) abort();
      tg_sym_free(&back);
    }
    /* The lines are this harness's; the array goes with the module. */
    for (size_t k = 0; k < m->n_addrs; k++) {
      m->addrs[k].lines = NULL;
      m->addrs[k].n_lines = 0;
    }
  }
  if (pcs > TG_SYM_MAX_PCS) abort();
  tg_buf_free(&out);
  tg_sym_free(&s);
  return 0;
}
