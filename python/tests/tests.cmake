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

# The documented install (docs/python.md): the component alone, into a scratch prefix, imported from
# there (not from the build tree) by /usr/bin/python3 in another folder.
set(CF_PY_INST ${CMAKE_CURRENT_BINARY_DIR}/install_test)
add_test(NAME "python: cmake --install --component python gives an importable package"
         COMMAND sh -c "rm -rf '${CF_PY_INST}' && '${CMAKE_COMMAND}' --install '${CMAKE_BINARY_DIR}' --component python \
                        --prefix '${CF_PY_INST}' >/dev/null && cd / && \
                        PYTHONPATH='${CF_PY_INST}/${CF_PYTHON_INSTALL_DIR}' '${Python3_EXECUTABLE}' -c \
                        'import causalflow, causalflow.rollout as r; assert causalflow.__file__.startswith(\"${CF_PY_INST}/\"), causalflow.__file__; p = r.rollout(model=\"mpt-7b\", n=16)[\"residual\"]; assert abs(p.sum() - 1) < 1e-12; print(\"installed\", causalflow.__version__)'")
set_tests_properties("python: cmake --install --component python gives an importable package" PROPERTIES
  PASS_REGULAR_EXPRESSION "installed [0-9]" TIMEOUT 120)
