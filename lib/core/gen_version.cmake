# Writes the git revision into ${OUT} at BUILD time (custom target cf_version), so the `meta`
# block of every report names the revision the binary was built from, not the one CMake was
# configured at. The file is rewritten only when the text changes: a clean rebuild recompiles
# one source file, an unchanged tree nothing.
set(rev "unknown")
if(GIT_EXECUTABLE)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short HEAD WORKING_DIRECTORY ${ROOT}
    OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT rev)
    set(rev "unknown")
  else()
    # Uncommitted changes to tracked files make the numbers unreproducible from the hash alone.
    execute_process(COMMAND ${GIT_EXECUTABLE} status --porcelain --untracked-files=no
      WORKING_DIRECTORY ${ROOT} OUTPUT_VARIABLE dirty ERROR_QUIET)
    if(dirty)
      set(rev "${rev}-dirty")
    endif()
  endif()
endif()
set(text "// Generated at build time by lib/core/gen_version.cmake.\n#include \"cf/core/version.hpp\"\nnamespace cf {\nconst char* const kGitRevision = \"${rev}\";\n}  // namespace cf\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
else()
  set(old "")
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
