# The consumer library and the tracegate CLI against a real tracegated (the
# producer side is tests/support's raw producer). Included from
# tests/consumer/CMakeLists.txt.
tg_add_test(test_consumer_lib
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_consumer_lib.c
  LIBS tg_consumer tg_test_support)
tg_add_test(test_cli_e2e
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cli_e2e.c
  LIBS tg_test_support tg_proto)
target_compile_definitions(test_cli_e2e PRIVATE
                           TRACEGATE_CLI_PATH="$<TARGET_FILE:tracegate>")
add_dependencies(test_cli_e2e tracegate)
