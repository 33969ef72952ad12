# PTX for the CUDA backend. include(cmake/ptx.cmake) from CMakeLists.txt adds
# a `ptx` target that regenerates internal/device/cuda/ptx/*.ptx from
# kernels/*.cu with clang-16 (no CUDA SDK needed), and a `check-ptx` target
# (also registered with ctest when testing is enabled) that fails when the
# committed PTX is stale.
find_program(KVWARDEN_CLANG_CUDA NAMES clang++-16)
find_program(KVWARDEN_BASH NAMES bash REQUIRED)
set(KVWARDEN_PTX_DIR ${CMAKE_CURRENT_SOURCE_DIR}/internal/device/cuda/ptx)
file(GLOB KVWARDEN_KERNEL_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/kernels/*.cu ${CMAKE_CURRENT_SOURCE_DIR}/kernels/*.h)
if(KVWARDEN_CLANG_CUDA)
  add_custom_command(
    OUTPUT ${KVWARDEN_PTX_DIR}/kvwarden_sm80.ptx ${KVWARDEN_PTX_DIR}/kvwarden_sm90.ptx
    COMMAND ${CMAKE_COMMAND} -E env CLANG_CUDA=${KVWARDEN_CLANG_CUDA}
            ${KVWARDEN_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/kernels/build-ptx.sh ${KVWARDEN_PTX_DIR}
    DEPENDS ${KVWARDEN_KERNEL_SOURCES} ${CMAKE_CURRENT_SOURCE_DIR}/kernels/build-ptx.sh
    COMMENT "Compiling kernels/*.cu to PTX with clang-16"
    VERBATIM)
  add_custom_target(ptx DEPENDS ${KVWARDEN_PTX_DIR}/kvwarden_sm80.ptx ${KVWARDEN_PTX_DIR}/kvwarden_sm90.ptx)
else()
  message(STATUS "clang++-16 not found: the ptx target is unavailable (the committed PTX is used)")
endif()
add_custom_target(check-ptx
  COMMAND ${KVWARDEN_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check-ptx.sh
  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
  COMMENT "Checking that the committed PTX is current"
  VERBATIM)
if(BUILD_TESTING OR CMAKE_TESTING_ENABLED)
  add_test(NAME check-ptx COMMAND ${KVWARDEN_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check-ptx.sh
           WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
endif()
