# Warning and sanitizer flags live on INTERFACE targets that our own targets link;
# nothing here touches global flags, so third-party code is compiled as its authors intend.
add_library(dtplan_warnings INTERFACE)
target_compile_options(dtplan_warnings INTERFACE -Wall -Wextra -Werror -Wshadow -Wnon-virtual-dtor)

add_library(dtplan_sanitize INTERFACE)
if(DTPLAN_FUZZ)
  # libFuzzer targets (fuzz/): every library is instrumented for coverage and checked by ASan and
  # UBSan; only the fuzzers link the fuzzer's main.
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "DTPLAN_FUZZ needs clang (-DCMAKE_CXX_COMPILER=clang++)")
  endif()
  target_compile_options(dtplan_sanitize INTERFACE -fsanitize=fuzzer-no-link,address,undefined
                                                   -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(dtplan_sanitize INTERFACE -fsanitize=address,undefined)
elseif(DTPLAN_TSAN)
  # ThreadSanitizer for the multi-threaded search and refine (tests/unit/planner).
  target_compile_options(dtplan_sanitize INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(dtplan_sanitize INTERFACE -fsanitize=thread)
elseif(DTPLAN_SANITIZE)
  target_compile_options(dtplan_sanitize INTERFACE -fsanitize=address,undefined
                                                   -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(dtplan_sanitize INTERFACE -fsanitize=address,undefined)
endif()

# dtplan_library(NAME SOURCES...): one static library per folder, with our flags.
function(dtplan_library name)
  add_library(${name} STATIC ${ARGN})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE dtplan_warnings PUBLIC dtplan_sanitize)
endfunction()

# dtplan_link_plugins(TARGET): link every plug-in object (schedules, collective algorithms,
# emitters, backends) into an executable so their self-registrations are kept.
function(dtplan_link_plugins target)
  target_link_libraries(${target} PRIVATE dtplan_sim_plugins dtplan_planner_plugins
                                          dtplan_calibrate_plugins dtplan_executor_plugins
                                          dtplan_executor dtplan_calibrate dtplan_planner dtplan_sim)
endfunction()
