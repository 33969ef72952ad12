# ctest driver (cmake -P): install the build tree into a scratch prefix, then
# build bindings/c/consumer against it with find_package(kvwarden) and with
# pkg-config, and run both binaries.
foreach(v BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR C_COMPILER)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "test-install.cmake: ${v} not set")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/kvwarden.h lib/libkvwarden.so lib/pkgconfig/kvwarden.pc
          lib/cmake/kvwarden/kvwardenConfig.cmake lib/cmake/kvwarden/kvwardenConfigVersion.cmake)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install tree lacks ${f}")
  endif()
endforeach()
if(EXISTS ${prefix}/include/libkvwarden.h)
  message(FATAL_ERROR "cgo's generated header must not be installed")
endif()

# find_package(kvwarden)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/bindings/c/consumer -B ${WORK_DIR}/consumer-build
    -G ${GENERATOR} -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_PREFIX_PATH=${prefix})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer-build)
run(${WORK_DIR}/consumer-build/consumer)

# pkg-config
find_program(PKG_CONFIG pkg-config)
if(PKG_CONFIG)
  set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
  execute_process(COMMAND ${PKG_CONFIG} --cflags --libs kvwarden OUTPUT_VARIABLE flags
                  RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config kvwarden failed")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run(${C_COMPILER} -std=c99 -Wall -Werror ${SOURCE_DIR}/bindings/c/consumer/consumer.c ${flags}
      -Wl,-rpath,${prefix}/lib -o ${WORK_DIR}/consumer-pkgconfig)
  run(${WORK_DIR}/consumer-pkgconfig)
else()
  message(STATUS "pkg-config not found; skipped the pkg-config consumer")
endif()
message("consumer: ok")
