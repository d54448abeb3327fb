# cmake -P script run at every build (target dmuon_git_commit): writes OUT, a C++ file defining
# dmuon::build_info::git_commit(), with the source tree's commit and "-dirty" when tracked files
# differ from it, so --version and the results files name the code really built, not the commit
# of the last configure. The file is rewritten only when its text changes (no rebuild loop).
#   -DSRC=<source dir> -DOUT=<file> -DGIT=<git executable or empty>
set(commit "unknown")
if(GIT AND EXISTS "${SRC}/.git")
  execute_process(COMMAND "${GIT}" rev-parse HEAD WORKING_DIRECTORY "${SRC}"
                  OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                  RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND head)
    set(commit "${head}")
    execute_process(COMMAND "${GIT}" status --porcelain --untracked-files=no
                    WORKING_DIRECTORY "${SRC}" OUTPUT_VARIABLE changes ERROR_QUIET
                    RESULT_VARIABLE rc2)
    if(rc2 EQUAL 0 AND NOT changes STREQUAL "")
      string(APPEND commit "-dirty")
    endif()
  endif()
endif()
set(text "// Generated at build time by cmake/DmuonGitCommit.cmake.\n#include \"dmuon/base/build_info.hpp\"\n\nnamespace dmuon::build_info {\nconst char* git_commit() {\n  return \"${commit}\";\n}\n}  // namespace dmuon::build_info\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL text)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${text}")
