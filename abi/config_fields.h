/* The typed-config fields tracegate-probes acts on, and the fields of a
 * config it would not act on: named by the probes when a data source
 * starts and by the CLI before it sends the config, from this one table.
 *
 * A contract between the two sides of a data source's config, over
 * Perfetto's DataSourceConfig schema (proto/): the side that writes a
 * config (the CLI) and the side that reads it (the producer) must agree
 * on which fields mean something, and neither may include the other, so
 * the table lives below both, here.
 *
 * Owns: the table of acted-on fields per data source. Must never: depend
 * on the agent or the consumer, do I/O, log or print (each side words its
 * own warning). Pure and thread-safe.
 */
#ifndef TRACEGATE_ABI_CONFIG_FIELDS_H
#define TRACEGATE_ABI_CONFIG_FIELDS_H

#include <stddef.h>
#include <stdint.h>

/* Writes into |out| (|cap| bytes, NUL-terminated, ", "-separated) the names
 * of the fields set in the typed config of |ds_name| ("linux.sys_stats",
 * "linux.process_stats", "linux.inode_file_map") that tracegate-probes
 * does not act on; fields newer than our schema are named "field #N".
 * |cfg| is a serialized DataSourceConfig (borrowed, |len| bytes,
 * untrusted). Returns how many there are, counting those that did not fit
 * (0: |out| is "", also for another data source or a config that does not
 * decode). */
size_t tg_probes_unacted_fields(const char *ds_name, const uint8_t *cfg,
                                size_t len, char *out, size_t cap);

#endif /* TRACEGATE_ABI_CONFIG_FIELDS_H */
