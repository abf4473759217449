# cmake -DBUILD_DIR=... -DWORK_DIR=... -DSOURCE_DIR=... -DGENERATOR=...
#       -DCXX_COMPILER=... -DBUILD_TYPE=... [-DCXX_FLAGS=...] -P run_downstream.cmake
# Installs the sacplan build in BUILD_DIR into a fresh prefix under WORK_DIR,
# then configures, builds and runs the downstream project in SOURCE_DIR
# against it with find_package(sacplan). Any failing step fails the test.
function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok\n${out}")
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run_step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(expected
    lib/cmake/sacplan/sacplanConfig.cmake
    lib/cmake/sacplan/sacplanConfigVersion.cmake
    include/sacplan/status_macros.h
    include/sacplan/planner/search/solver.h
    bin/sacplan)
  if(NOT EXISTS ${prefix}/${expected})
    message(FATAL_ERROR "the install has no ${expected}")
  endif()
endforeach()
run_step("configure downstream" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build
  -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
  "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${CXX_FLAGS}"
  -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
run_step("build downstream" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run_step("run downstream" ${WORK_DIR}/build/plan_tiny)
