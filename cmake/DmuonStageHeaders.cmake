# dmuon_stage_headers(SRC GENERATED STAGE): the public headers in their installed layout, one
# root for all of them (include/dmuon/), so a consumer's #include paths name dmuon and nothing
# else lands at the top of a shared include directory:
#   src/dmuon/<area>/*.hpp               -> STAGE/dmuon/<area>/
#   GENERATED/dmuon/base/build_info.hpp  -> STAGE/dmuon/base/
#   kernels/**/*.hpp (not host/, not cuda/standalone/) -> STAGE/dmuon/kernels/
# Inside the source tree the kernels' headers are spelled "kernels/..." (the repository root is
# their include directory); the staged copies spell them "dmuon/kernels/...", the only spelling
# the installed tree has. Run at install time (cmake/DmuonInstall.cmake), so it always copies
# the current sources; a staged file is rewritten only when its text changes (installed headers
# keep their time stamps) and a header gone from the sources leaves the stage.
function(dmuon_stage_headers src generated stage)
  file(GLOB_RECURSE _lib RELATIVE "${src}/src" "${src}/src/dmuon/*.hpp")
  file(GLOB_RECURSE _kernels RELATIVE "${src}" "${src}/kernels/*.hpp")
  set(_pairs "")  # source|staged-relative
  foreach(f IN LISTS _lib)
    list(APPEND _pairs "${src}/src/${f}|${f}")
  endforeach()
  list(APPEND _pairs "${generated}/dmuon/base/build_info.hpp|dmuon/base/build_info.hpp")
  foreach(f IN LISTS _kernels)
    if(NOT f MATCHES "^kernels/(host|cuda/standalone)/")
      list(APPEND _pairs "${src}/${f}|dmuon/${f}")
    endif()
  endforeach()

  set(_staged "")
  foreach(p IN LISTS _pairs)
    string(REPLACE "|" ";" p "${p}")
    list(GET p 0 from)
    list(GET p 1 to)
    list(APPEND _staged "${to}")
    file(READ "${from}" text)
    string(REGEX REPLACE "#include ([\"<])kernels/" "#include \\1dmuon/kernels/" text "${text}")
    if(EXISTS "${stage}/${to}")
      file(READ "${stage}/${to}" old)
      if(old STREQUAL text)
        continue()
      endif()
    endif()
    file(WRITE "${stage}/${to}" "${text}")
  endforeach()

  file(GLOB_RECURSE _present RELATIVE "${stage}" "${stage}/*")
  foreach(f IN LISTS _present)
    list(FIND _staged "${f}" i)  # (no IN_LIST: install scripts run without the project's policies)
    if(i EQUAL -1)
      file(REMOVE "${stage}/${f}")
    endif()
  endforeach()
endfunction()
