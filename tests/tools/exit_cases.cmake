# cf_exit2_cases(NAME <test name prefix> COMMAND <program and leading args...> [APPEND <args...>]
#                [FIXTURES <fixture>...] CASES <case>...)
# One test per case that runs tests/tools/expect_exit.sh: the program must exit 2 and print the
# regex on stderr (docs/conventions.md: bad input -> clear message, exit 2). A case is
# "name|stderr regex|arg|arg|...": '|' separates both the fields and the arguments, so a case
# passes through function arguments intact (';' would split it). The test is "<NAME> (<name>)".
function(cf_exit2_cases)
  # FIXTURES is multi-valued: a quoted "a;b" argument is split by ${ARGN}, and a single-valued
  # keyword would keep only its first fixture (the hf export cases then raced their hf_trained setup).
  cmake_parse_arguments(X "" "NAME" "FIXTURES;COMMAND;APPEND;CASES" ${ARGN})
  foreach(case IN LISTS X_CASES)
    string(REPLACE "|" ";" parts "${case}")
    list(GET parts 0 name)
    list(GET parts 1 regex)
    list(SUBLIST parts 2 -1 args)
    set(test "${X_NAME} (${name})")
    add_test(NAME "${test}" COMMAND ${CF_SOURCE_DIR}/tests/tools/expect_exit.sh 2 --stderr "${regex}" --
             ${X_COMMAND} ${args} ${X_APPEND})
    if(X_FIXTURES)
      set_tests_properties("${test}" PROPERTIES FIXTURES_REQUIRED "${X_FIXTURES}")
    endif()
  endforeach()
endfunction()
