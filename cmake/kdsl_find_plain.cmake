# kdsl_find_plain(PACKAGE HEADER LIBRARY TARGET): for the Find modules of libraries that Debian
# ships without a CMake package: finds HEADER and LIBRARY, reports PACKAGE as found or not, and
# defines the imported target TARGET.
include(FindPackageHandleStandardArgs)
macro(kdsl_find_plain package header library target)
  string(TOUPPER ${package} _kdsl_up)
  find_path(${_kdsl_up}_INCLUDE_DIR NAMES ${header})
  find_library(${_kdsl_up}_LIBRARY NAMES ${library})
  find_package_handle_standard_args(${package} REQUIRED_VARS ${_kdsl_up}_LIBRARY
                                                             ${_kdsl_up}_INCLUDE_DIR)
  if(${package}_FOUND AND NOT TARGET ${target})
    add_library(${target} UNKNOWN IMPORTED)
    set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${${_kdsl_up}_LIBRARY}"
                                               INTERFACE_INCLUDE_DIRECTORIES "${${_kdsl_up}_INCLUDE_DIR}")
  endif()
  mark_as_advanced(${_kdsl_up}_INCLUDE_DIR ${_kdsl_up}_LIBRARY)
endmacro()
