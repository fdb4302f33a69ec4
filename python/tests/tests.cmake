# Tests of the Python module (python/tests/test_*.py), one CTest per file, run with Debian's
# /usr/bin/python3 and pytest through run_pytest.py: pytest's "no tests collected" (exit 5) fails,
# a missing pytest or numpy skips (77) except under CI=true (fails). The tools the tests compare with
# are found through CF_BIN (the folder of the built `coverage`, `rollout`, ... binaries).
file(GLOB CF_PY_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_*.py)
foreach(t ${CF_PY_TESTS})
  get_filename_component(name ${t} NAME_WE)
  string(REGEX REPLACE "^test_" "" short ${name})
  set(test_name "python: ${short} (pytest ${name}.py)")
  add_test(NAME "${test_name}"
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/run_pytest.py ${t}
           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties("${test_name}" PROPERTIES
    SKIP_RETURN_CODE 77
    TIMEOUT 600
    ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;CF_BIN=$<TARGET_FILE_DIR:coverage>;CF_SOURCE_DIR=${CMAKE_SOURCE_DIR};PYTHONDONTWRITEBYTECODE=1;OMP_NUM_THREADS=1")
endforeach()

# The quick-start notebook, executed in quick mode (CF_QUICK=1) by nbconvert into the build tree;
# the acceptance limit is 2 minutes.
add_test(NAME "python: notebooks/quickstart.ipynb executes (nbconvert, quick mode)"
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/run_notebook.py
                 ${CMAKE_SOURCE_DIR}/notebooks/quickstart.ipynb ${CMAKE_CURRENT_BINARY_DIR}/notebook_out)
set_tests_properties("python: notebooks/quickstart.ipynb executes (nbconvert, quick mode)" PROPERTIES
  SKIP_RETURN_CODE 77
  TIMEOUT 120
  ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;CF_SOURCE_DIR=${CMAKE_SOURCE_DIR};PYTHONDONTWRITEBYTECODE=1")
