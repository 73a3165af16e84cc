# Finds xxHash (Debian: libxxhash-dev), which ships no CMake package. Defines xxhash::xxhash.
include(${CMAKE_CURRENT_LIST_DIR}/kdsl_find_plain.cmake)
kdsl_find_plain(xxhash xxhash.h xxhash xxhash::xxhash)
