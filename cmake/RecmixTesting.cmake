# Test registration helpers.
#   recmix_add_test(NAME name SOURCES a.cpp ... LIBS lib ...)
#   recmix_add_mpi_test(NAME name SOURCES ... LIBS ... RANKS 1 2 4)
# MPI tests register as name.1rank, name.2ranks, name.4ranks; the launcher flags this machine
# needs (root, oversubscription, no single-copy shared memory) live in one cache variable, and
# RECMIX_MPI_TEST_LAUNCH starts mpiexec with them through tests/ahead.sh (ahead of other work on
# the machine, where it may).
include(GoogleTest)
find_package(GTest REQUIRED)

set(RECMIX_MPIEXEC_FLAGS "--allow-run-as-root;--oversubscribe;--mca;btl_vader_single_copy_mechanism;none"
    CACHE STRING "Flags passed to mpiexec before the rank count for MPI tests")
# Every MPI test's command starts with this, then the rank count.
set(RECMIX_MPI_TEST_LAUNCH ${PROJECT_SOURCE_DIR}/tests/ahead.sh ${MPIEXEC_EXECUTABLE} ${RECMIX_MPIEXEC_FLAGS}
    ${MPIEXEC_NUMPROC_FLAG})

function(recmix_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main recmix_warnings)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  # One value per property: gtest_discover_tests splits list values.
  set(props TIMEOUT ${T_TIMEOUT} ENVIRONMENT "RECMIX_SHARED_DIR=${RECMIX_SHARED_DIR}")
  if(T_LABELS)
    list(APPEND props LABELS ${T_LABELS})
  endif()
  gtest_discover_tests(${T_NAME} DISCOVERY_TIMEOUT 60 PROPERTIES ${props})
endfunction()

# The MPI test executable links tests/mpi_gtest_main.cpp, which initialises MPI and makes a
# failure on any rank fail every rank.
# COST: the seconds the test takes at one rank, about (ctest starts the costliest tests first,
# which keeps both cores busy to the end on a fresh build that has no timings of its own).
# PARTS: gtest filters; each rank count's test is registered once per part (name.<ranks>.<i>), so
# that the parts of a long program run side by side.
function(recmix_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT;COST" "SOURCES;LIBS;RANKS;PARTS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES} ${PROJECT_SOURCE_DIR}/tests/mpi_gtest_main.cpp)
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest MPI::MPI_CXX recmix_warnings)
  if(NOT T_RANKS)
    set(T_RANKS 1 2 4)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  foreach(n IN LISTS T_RANKS)
    if(n EQUAL 1)
      set(suffix 1rank)
    else()
      set(suffix ${n}ranks)
    endif()
    set(names ${T_NAME}.${suffix})
    set(filters "")
    if(T_PARTS)
      set(names "")
      set(i 0)
      foreach(part IN LISTS T_PARTS)
        list(APPEND names ${T_NAME}.${suffix}.${i})
        list(APPEND filters --gtest_filter=${part})
        math(EXPR i "${i} + 1")
      endforeach()
    endif()
    foreach(test IN LISTS names)
      set(filter "")
      if(filters)
        list(POP_FRONT filters filter)
      endif()
      add_test(NAME ${test}
               COMMAND ${RECMIX_MPI_TEST_LAUNCH} ${n}
                       $<TARGET_FILE:${T_NAME}> ${filter})
      set_tests_properties(${test} PROPERTIES TIMEOUT ${T_TIMEOUT} PROCESSORS ${n}
        LABELS mpi
        ENVIRONMENT "RECMIX_SHARED_DIR=${RECMIX_SHARED_DIR};OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
      if(T_COST)
        set_tests_properties(${test} PROPERTIES COST ${T_COST})
      endif()
    endforeach()
  endforeach()
endfunction()
