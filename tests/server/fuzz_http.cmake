# fuzz_http: a libFuzzer target over request parsing, routing and JSON validation (fuzz_http.cpp), built with clang
# (-fsanitize=fuzzer,address) whatever compiler builds the rest: the compiler itself when it is clang, else
# /usr/bin/clang++ when present and able to link libFuzzer. Registered as the CTest test fuzz_http (label slow):
# 20000 runs from the seed corpus, new inputs and crash artifacts kept in the build folder.
# Included from tests/CMakeLists.txt when GKQ_WITH_SERVER is on; needs GKQ_LLHTTP_DIR / GKQ_LLHTTP_INCLUDE_DIR.

if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set(GKQ_FUZZ_CXX ${CMAKE_CXX_COMPILER})
elseif(EXISTS /usr/bin/clang++)
    set(GKQ_FUZZ_CXX /usr/bin/clang++)
else()
    find_program(GKQ_FUZZ_CXX NAMES clang++ clang++-16 clang++-15 clang++-14)
endif()

set(_fuzz_ok OFF)
if(GKQ_FUZZ_CXX)
    set(_probe_dir ${CMAKE_CURRENT_BINARY_DIR}/fuzz_probe)
    file(MAKE_DIRECTORY ${_probe_dir})
    file(WRITE ${_probe_dir}/probe.cpp
         "#include <cstdint>\n#include <cstddef>\nextern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n")
    execute_process(COMMAND ${GKQ_FUZZ_CXX} -fsanitize=fuzzer,address ${_probe_dir}/probe.cpp -o ${_probe_dir}/probe
                    RESULT_VARIABLE _probe_rc OUTPUT_QUIET ERROR_QUIET)
    if(_probe_rc EQUAL 0)
        set(_fuzz_ok ON)
    endif()
endif()

if(NOT _fuzz_ok)
    message(STATUS "fuzz_http: not built (no clang++ that links -fsanitize=fuzzer; Debian: clang, libclang-rt-dev)")
    return()
endif()
message(STATUS "fuzz_http: libFuzzer target built with ${GKQ_FUZZ_CXX}")

set(_fuzz_dir ${CMAKE_CURRENT_BINARY_DIR}/fuzz_http.dir)
set(_fuzz_flags -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address -DLLHTTP_STRICT_MODE=1)
set(_fuzz_objects)
foreach(_src llhttp.c api.c http.c)
    set(_obj ${_fuzz_dir}/llhttp_${_src}.o)
    add_custom_command(OUTPUT ${_obj}
        COMMAND ${CMAKE_COMMAND} -E make_directory ${_fuzz_dir}
        COMMAND ${GKQ_FUZZ_CXX} -x c -std=c99 ${_fuzz_flags} -w -I${GKQ_LLHTTP_INCLUDE_DIR}
                -c ${GKQ_LLHTTP_DIR}/${_src} -o ${_obj}
        DEPENDS ${GKQ_LLHTTP_DIR}/${_src}
        COMMENT "fuzz_http: compiling llhttp ${_src} with clang" VERBATIM)
    list(APPEND _fuzz_objects ${_obj})
endforeach()
foreach(_src core/src/server/http_parser.cpp core/src/server/api.cpp core/src/server/http_response.cpp
             tests/server/fuzz_http.cpp)
    get_filename_component(_name ${_src} NAME_WE)
    set(_obj ${_fuzz_dir}/${_name}.o)
    add_custom_command(OUTPUT ${_obj}
        COMMAND ${CMAKE_COMMAND} -E make_directory ${_fuzz_dir}
        COMMAND ${GKQ_FUZZ_CXX} -std=c++20 ${_fuzz_flags} ${GKQ_WARNING_FLAGS} -I${PROJECT_SOURCE_DIR}/core/include
                -I${PROJECT_SOURCE_DIR}/core/src -isystem ${GKQ_LLHTTP_INCLUDE_DIR} -MD -MF ${_obj}.d
                -c ${PROJECT_SOURCE_DIR}/${_src} -o ${_obj}
        DEPENDS ${PROJECT_SOURCE_DIR}/${_src}
        DEPFILE ${_obj}.d
        COMMENT "fuzz_http: compiling ${_src} with clang" VERBATIM)
    list(APPEND _fuzz_objects ${_obj})
endforeach()
# The program lives in fuzz_http.dir/: a file named like the target would clash with the target in Ninja.
set(_fuzz_bin ${_fuzz_dir}/fuzz_http)
add_custom_command(OUTPUT ${_fuzz_bin}
    COMMAND ${GKQ_FUZZ_CXX} -fsanitize=fuzzer,address ${_fuzz_objects} -o ${_fuzz_bin}
    DEPENDS ${_fuzz_objects}
    COMMENT "fuzz_http: linking" VERBATIM)
add_custom_target(fuzz_http ALL DEPENDS ${_fuzz_bin})

# New corpus entries go to the build folder (first directory); the committed seeds are only read.
add_test(NAME fuzz_http
    COMMAND bash -c "mkdir -p fuzz_http_corpus fuzz_http_artifacts && exec \"$0\" \"$@\""
            ${_fuzz_bin} -runs=20000 -max_len=4096 -timeout=10 -rss_limit_mb=2048
            -dict=${CMAKE_CURRENT_SOURCE_DIR}/server/fuzz_http.dict -artifact_prefix=fuzz_http_artifacts/
            fuzz_http_corpus ${CMAKE_CURRENT_SOURCE_DIR}/server/fuzz_corpus
    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(fuzz_http PROPERTIES LABELS "server;slow" TIMEOUT 600)
