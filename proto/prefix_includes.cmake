# Rewrites the includes protoc-c writes into its output so that every
# generated header is named with the pb/ prefix: "ipc/x.pb-c.h" becomes
# "pb/ipc/x.pb-c.h". Run as: cmake -DFILES="a.c;a.h" -P prefix_includes.cmake
foreach(f IN LISTS FILES)
  file(READ "${f}" text)
  string(REGEX REPLACE "#include \"([^\"]+\\.pb-c\\.h)\"" "#include \"pb/\\1\""
         text "${text}")
  file(WRITE "${f}" "${text}")
endforeach()
