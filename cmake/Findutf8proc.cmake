# Finds utf8proc (Debian: libutf8proc-dev), which ships no CMake package. Defines
# utf8proc::utf8proc.
include(${CMAKE_CURRENT_LIST_DIR}/kdsl_find_plain.cmake)
kdsl_find_plain(utf8proc utf8proc.h utf8proc utf8proc::utf8proc)
