# The consumer library (ConsumerPort over any transport) and the `tracegate`
# CLI. Included from consumer/CMakeLists.txt, after tg_consumer is defined.
target_sources(tg_consumer PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/consumer.c
  ${CMAKE_CURRENT_LIST_DIR}/consumer_read.c
  ${CMAKE_CURRENT_LIST_DIR}/consumer_query.c
  ${CMAKE_CURRENT_LIST_DIR}/consumer_clone.c
  ${CMAKE_CURRENT_LIST_DIR}/consumer_service.c
  ${CMAKE_CURRENT_LIST_DIR}/recording.c
  ${CMAKE_CURRENT_LIST_DIR}/recording_drain.c
  ${CMAKE_CURRENT_LIST_DIR}/recording_replay.c
  ${CMAKE_CURRENT_LIST_DIR}/slice_reassembler.c
  ${CMAKE_CURRENT_LIST_DIR}/packet_inflate.c
)
target_link_libraries(tg_consumer PUBLIC tg_ipc tg_common ZLIB::ZLIB)

add_executable(tracegate
  ${CMAKE_CURRENT_LIST_DIR}/cli/main.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/args.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/conn.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/config.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/output.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/progress.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/record.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/record_flow.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/record_clone.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/record_trigger.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/record_snapshot.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/record_check.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/is_detached.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/query.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/stats.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/tls_defaults.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/trigger.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/remote.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/fleet.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/fleet_host.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/fleet_merge.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/fleet_names.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/fleet_ui.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/fleet_ui_pick.c
)
# tg_tls: the TLS transport to relays (-H host:port).
# The CLI's parsers of hosts and -H specs, apart so that a fuzz target
# (tests/fuzz/fuzz_hosts_file.c) links them without the CLI.
add_library(tg_cli_targets STATIC
  ${CMAKE_CURRENT_LIST_DIR}/cli/target.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/hosts_file.c
)
target_link_libraries(tg_cli_targets PUBLIC tg_consumer tg_ipc)
# The CLI's saved TLS sessions and their file, apart for the same reason
# (tests/fuzz/fuzz_session_cache.c) and for its unit test.
add_library(tg_cli_session_cache STATIC
  ${CMAKE_CURRENT_LIST_DIR}/cli/session_cache.c
)
target_link_libraries(tg_cli_session_cache PUBLIC tg_common)
# tg_probes_core: only probes_config.c's tg_probes_unacted_fields(), for
# the warning about config fields the probes ignore (record_check.c).
target_link_libraries(tracegate PRIVATE tg_cli_targets tg_cli_session_cache
                      tg_consumer tg_tls
                      tg_probes_core)
