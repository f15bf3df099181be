# IPC unit tests on an in-process loop: the channel's fd cap and bulk
# reads, the host's refusals, the client's close semantics. Included from
# tests/CMakeLists.txt (and harmlessly again from tests/ipc/CMakeLists.txt if that includes it).
include_guard(GLOBAL)
tg_add_test(test_channel_fds
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_channel_fds.c
  LIBS tg_test_support)
tg_add_test(test_channel_bulk
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_channel_bulk.c
  LIBS tg_test_support)
foreach(t test_host_refusals test_client_close)
  if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/${t}.c)
    tg_add_test(${t}
      SOURCES ${CMAKE_CURRENT_LIST_DIR}/${t}.c
              ${CMAKE_CURRENT_LIST_DIR}/ipc_fixture.c
      LIBS tg_test_support tg_proto)
  endif()
endforeach()
