# IPC unit tests on an in-process loop: the channel's fd cap, the host's
# refusals, the client's close semantics. Included from tests/CMakeLists.txt
# (and harmlessly again from tests/ipc/CMakeLists.txt if that includes it).
include_guard(GLOBAL)
foreach(t test_channel_fds)
  tg_add_test(${t} SOURCES ${CMAKE_CURRENT_LIST_DIR}/${t}.c
              LIBS tg_test_support)
endforeach()
