# The consumer library and the tracegate CLI against a real tracegated (the
# producer side is tests/support's raw producer). Included from
# tests/consumer/CMakeLists.txt.
tg_add_test(test_consumer_lib
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_consumer_lib.c
  LIBS tg_consumer tg_test_support)
# The CLI's output file, compiled in from the CLI's sources.
tg_add_test(test_cli_output
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cli_output.c
          ${PROJECT_SOURCE_DIR}/consumer/cli/output.c
  LIBS tg_consumer tg_test_support)
# Which hosts the progress of a big fleet names (fleet_ui_pick.c).
tg_add_test(test_fleet_ui
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fleet_ui.c
          ${PROJECT_SOURCE_DIR}/consumer/cli/fleet_ui_pick.c
  LIBS tg_consumer tg_tls)
tg_add_test(test_cli_e2e
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cli_e2e.c
          ${CMAKE_CURRENT_LIST_DIR}/cli_child.c
  LIBS tg_test_support tg_proto)
target_compile_definitions(test_cli_e2e PRIVATE
                           TRACEGATE_CLI_PATH="$<TARGET_FILE:tracegate>")
add_dependencies(test_cli_e2e tracegate)
# Where -o points (devices, FIFOs, symlinks, stdout, a full disk) and the
# CLI's failures that must leave nothing behind (a wrong --socket).
tg_add_test(test_cli_output_files
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cli_output_files.c
          ${CMAKE_CURRENT_LIST_DIR}/cli_child.c
  LIBS tg_test_support tg_proto)
target_compile_definitions(test_cli_output_files PRIVATE
                           TRACEGATE_CLI_PATH="$<TARGET_FILE:tracegate>")
add_dependencies(test_cli_output_files tracegate)
# The fleet harness, built once for the four fleet end-to-end tests below:
# hosts (tracegated + tracegate-relay on a loopback TLS port + a raw
# producer), the CLI as a child, certificates made by deploy/certs/tg-certs
# (through tests/support), trace files, and a proxy that cuts links.
if(TARGET tracegate-relay)
  add_library(tg_fleet_harness STATIC
    ${CMAKE_CURRENT_LIST_DIR}/fleet_harness.c
    ${CMAKE_CURRENT_LIST_DIR}/fleet_trace.c
    ${CMAKE_CURRENT_LIST_DIR}/fleet_proxy.c)
  target_include_directories(tg_fleet_harness PUBLIC ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(tg_fleet_harness
    PUBLIC tg_test_support tg_proto Threads::Threads PkgConfig::CMOCKA)
  target_compile_definitions(tg_fleet_harness PRIVATE
    TRACEGATE_CLI_PATH="$<TARGET_FILE:tracegate>"
    TRACEGATE_RELAY_PATH="$<TARGET_FILE:tracegate-relay>")
  add_dependencies(tg_fleet_harness tracegate tracegate-relay)
endif()
# Remote and fleet recording: hosts of the fleet harness, the CLI as a
# child.
if(TARGET tracegate-relay)
  tg_add_test(test_fleet_e2e
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fleet_e2e.c
    LIBS tg_fleet_harness
    TIMEOUT 300)
  # The ssh test's script runs the relay itself.
  target_compile_definitions(test_fleet_e2e PRIVATE
    TRACEGATE_RELAY_PATH="$<TARGET_FILE:tracegate-relay>")
endif()
# The recording engine (consumer/recording.h) against a real tracegated.
tg_add_test(test_recording
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_recording.c
  LIBS tg_consumer tg_test_support)
# Fleet recording through network faults (tests/support/fault_proxy.h):
# silent partitions, resets, per-session loss, clock re-syncs.
if(TARGET tracegate-relay)
  tg_add_test(test_fleet_netfail
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fleet_netfail.c
    LIBS tg_fleet_harness
    TIMEOUT 300)
endif()
# `tracegate trigger`, record's wait for a start trigger, and
# `record --clone`, against a real tracegated.
tg_add_test(test_cli_triggers
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cli_triggers.c
          ${CMAKE_CURRENT_LIST_DIR}/cli_child.c
  LIBS tg_test_support tg_proto)
target_compile_definitions(test_cli_triggers PRIVATE
                           TRACEGATE_CLI_PATH="$<TARGET_FILE:tracegate>")
add_dependencies(test_cli_triggers tracegate)
# Perfetto's record flags, checked data source names, end reasons and
# honest summaries (issue 15), end to end.
tg_add_test(test_cli_parity
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cli_parity.c
          ${CMAKE_CURRENT_LIST_DIR}/cli_child.c
  LIBS tg_test_support tg_proto)
target_compile_definitions(test_cli_parity PRIVATE
                           TRACEGATE_CLI_PATH="$<TARGET_FILE:tracegate>")
add_dependencies(test_cli_parity tracegate)

# compressed_packets inflated for the fleet merge (consumer/packet_inflate.c),
# against what the service's DEFLATE read-out writes.
tg_add_test(test_packet_inflate
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_packet_inflate.c
  LIBS tg_consumer tg_packet_deflate)
# tracegated's disconnect leases (TracegateConsumer), with raw consumers.
tg_add_test(test_session_lease
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_session_lease.c
  LIBS tg_test_support tg_proto)
# Sessions that outlive their relay (disconnect leases) and links cut
# while ReadBuffers replies are in flight (the relay's replay window):
# every packet exactly once.
if(TARGET tracegate-relay)
  tg_add_test(test_relay_survival_e2e
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_relay_survival_e2e.c
    LIBS tg_fleet_harness
    TIMEOUT 180)
endif()
# Silent partitions of 25 s, 2 min and 10 min with a read in flight (the
# replay window resends it), and one whose data overflows the host's
# buffer. The 2 and 10 min ones wait in real time: a test of their own,
# labelled "long" (make test runs every label; `ctest -LE long` skips
# them).
if(TARGET tracegate-relay)
  tg_add_test(test_fleet_partition
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fleet_partition.c
    LIBS tg_fleet_harness
    TIMEOUT 300)
  add_test(NAME test_fleet_partition_long COMMAND test_fleet_partition long)
  set_tests_properties(test_fleet_partition_long PROPERTIES TIMEOUT 1200
                       LABELS "long")
endif()
# Naming -H targets (target.c).
tg_add_test(test_cli_targets
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cli_targets.c
  LIBS tg_cli_targets)
# The CLI's saved TLS sessions and their file (session_cache.c).
tg_add_test(test_session_cache
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_session_cache.c
  LIBS tg_cli_session_cache tg_test_support)
