# The ready producers of agent/: tracegate-probes' parsers, encoders and
# config readers (tg_probes_core), and both tools end to end against a real
# tracegated. Included from tests/agent/CMakeLists.txt.
tg_add_test(test_probes SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_probes.c
            LIBS tg_probes_core)

tg_add_test(test_tools_e2e SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_tools_e2e.c
            LIBS tg_test_support tg_proto)
target_compile_definitions(test_tools_e2e PRIVATE
                           PROBES_PATH="$<TARGET_FILE:tracegate-probes>"
                           EMIT_PATH="$<TARGET_FILE:tracegate-emit>")
add_dependencies(test_tools_e2e tracegate-probes tracegate-emit)

tg_add_test(test_probes_kernel
            SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_probes_kernel.c
            LIBS tg_probes_core)

# linux.ftrace's page parser, format files, encoder and config reader on
# synthetic pages built byte by byte.
tg_add_test(test_ftrace_parse
            SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_ftrace_parse.c
            LIBS tg_probes_core)

# linux.ftrace's fast paths (field plans, compact_sched in one go) byte for
# byte against a reference encoder, in one segment and in small ones.
tg_add_test(test_ftrace_plan
            SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_ftrace_plan.c
            LIBS tg_probes_core)

# linux.ftrace end to end: tracegate-probes reading this machine's kernel
# for real sessions of a real tracegated. Needs root and tracefs (skipped
# without them unless TG_REQUIRE_FTRACE is set). Labelled tsan: the probes'
# reader thread and the agent's callbacks share the session slots.
tg_add_test(test_ftrace_e2e
            SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_ftrace_e2e.c
            LIBS tg_test_support tg_probes_core TIMEOUT 300 LABELS tsan)
target_compile_definitions(test_ftrace_e2e PRIVATE
                           PROBES_PATH="$<TARGET_FILE:tracegate-probes>")
add_dependencies(test_ftrace_e2e tracegate-probes)
