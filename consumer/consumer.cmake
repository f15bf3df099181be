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
  ${CMAKE_CURRENT_LIST_DIR}/slice_reassembler.c
)
target_link_libraries(tg_consumer PUBLIC tg_ipc tg_common)

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
  ${CMAKE_CURRENT_LIST_DIR}/cli/query.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/stats.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/trigger.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/target.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/remote.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/fleet.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/fleet_host.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/fleet_merge.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/fleet_ui.c
  ${CMAKE_CURRENT_LIST_DIR}/cli/fleet_ui_pick.c
)
# tg_tls: the TLS transport to relays (-H host:port).
target_link_libraries(tracegate PRIVATE tg_consumer tg_tls)
