/* ProducerPort: the producer socket's methods and the producer objects.
 *
 * Owns: struct tg_producer and its registered data sources and writers
 * (producer_smb.c writes the SMB fields and abuse counters of the same
 * producer). Must never: write a session or a data source instance (it
 * reports to session.h, which owns both), or trust a producer's bytes
 * before they are checked. The sessions reach it only through the
 * tg_producer_ops_t it installs: it calls them, never the other way.
 */
#ifndef TRACEGATE_SERVICE_PRODUCER_PORT_H
#define TRACEGATE_SERVICE_PRODUCER_PORT_H

#include <stdbool.h>
#include <stdint.h>

#include "abi/smb.h"
#include "common/buf.h"
#include "common/list.h"
#include "pb/config/trace_config.pb-c.h"
#include "service/service.h"
#include "service/trace_buffer.h" /* tg_producer_ident_t */

typedef struct tg_registered_ds {
  char *name;
  uint64_t id; /* producer-chosen descriptor id */
  bool will_notify_on_start;
  bool will_notify_on_stop;
  bool handles_incremental_state_clear;
  bool no_flush;
  /* The DataSourceDescriptor as the producer sent it (owned), returned
   * whole by QueryServiceState; counted in descriptor_bytes. */
  uint8_t *descriptor;
  size_t descriptor_len;
} tg_registered_ds_t;

typedef struct tg_writer_reg {
  uint16_t writer_id;
  uint32_t target_buffer; /* global buffer id */
} tg_writer_reg_t;

struct tg_producer {
  tg_service_t *svc;
  tg_ipc_host_conn_t *conn;
  tg_list_t node;
  tg_producer_ident_t ident; /* id + SO_PEERCRED uid/pid */
  /* Order of connection, never reused (ids wrap): where a paused
   * QueryServiceState resumes (svc->producers is in this order). */
  uint64_t serial;
  char *name;
  size_t smb_size_hint;
  size_t page_size_hint;
  bool initialized;

  /* SMB: the producer's own, adopted at InitializeConnection
   * (producer_smb_offer.h), else created lazily when the first data source
   * is set up. */
  int smb_fd;
  void *smb_map;
  tg_smb_t smb;
  bool smb_from_producer; /* SetupTracing then carries no fd */

  bool has_async_call; /* GetAsyncCommand stream open */
  tg_ipc_call_t async_call;
  bool smb_sent;

  tg_registered_ds_t **ds; /* each allocated alone: instances point at it */
  size_t n_ds;
  size_t descriptor_bytes; /* of all ds[i]->descriptor, at most
                              TG_SERVICE_MAX_DESCRIPTOR_BYTES_PER_PRODUCER */
  tg_writer_reg_t *writers;
  size_t n_writers;
  tg_list_t instances; /* tg_ds_instance_t.producer_node */
  tg_buf_t pending_cmds; /* [u32 len][GetAsyncCommandResponse] before the
                            GetAsyncCommand stream is open */
  int pending_smb_fd;    /* rides with the first pending command */

  uint64_t commits;
  uint64_t abi_violations; /* SMB misuse not attributable to a buffer */
  bool logged_refusal;     /* the first refused request was logged */
};

/* Serves ProducerPort on |def| and installs the ops through which the
 * sessions drive producers (svc->producer_ops, session.h). */
void tg__producer_port_bind(tg_service_t *svc, tg_ipc_service_def_t *def);

#endif /* TRACEGATE_SERVICE_PRODUCER_PORT_H */
