# Dependencies of the embedded HTTP server (GKQ_WITH_SERVER): liburing, and llhttp built from the C sources that
# Debian's node-llhttp package ships (bookworm has no llhttp library package). Defines:
#   gkq_llhttp      static library (llhttp.c, api.c, http.c) with its include directory
#   GKQ_LIBURING    imported target PkgConfig::GKQ_LIBURING
#   GKQ_LLHTTP_DIR / GKQ_LLHTTP_INCLUDE_DIR   where the sources were found (the fuzz target reuses them)

find_path(GKQ_LLHTTP_DIR llhttp.c api.c http.c
    PATHS /usr/share/llhttp /usr/share/nodejs/llhttp/src /usr/share/nodejs/llhttp/build/c
    NO_DEFAULT_PATH)
find_path(GKQ_LLHTTP_INCLUDE_DIR llhttp.h
    PATHS /usr/share/include/llhttp /usr/share/nodejs/llhttp/build /usr/share/nodejs/llhttp/include
          /usr/include/llhttp /usr/include
    NO_DEFAULT_PATH)
if(NOT GKQ_LLHTTP_DIR OR NOT GKQ_LLHTTP_INCLUDE_DIR)
    message(FATAL_ERROR
        "GKQ_WITH_SERVER=ON needs llhttp's C sources (llhttp.c, api.c, http.c and llhttp.h), which Debian ships in "
        "the node-llhttp package (/usr/share/llhttp, /usr/share/include/llhttp): run packaging/setup-deps.sh, or "
        "configure with -DGKQ_WITH_SERVER=OFF. Searched: GKQ_LLHTTP_DIR=${GKQ_LLHTTP_DIR} "
        "GKQ_LLHTTP_INCLUDE_DIR=${GKQ_LLHTTP_INCLUDE_DIR}")
endif()

add_library(gkq_llhttp STATIC
    ${GKQ_LLHTTP_DIR}/llhttp.c ${GKQ_LLHTTP_DIR}/api.c ${GKQ_LLHTTP_DIR}/http.c)
target_include_directories(gkq_llhttp SYSTEM PUBLIC ${GKQ_LLHTTP_INCLUDE_DIR})
set_target_properties(gkq_llhttp PROPERTIES POSITION_INDEPENDENT_CODE ON C_STANDARD 99)
# Strict mode: CRLF line ends only, no whitespace in or after header names, no data after "Connection: close".
target_compile_definitions(gkq_llhttp PUBLIC LLHTTP_STRICT_MODE=1)
# Third-party generated C: its warnings are not ours to fix.
target_compile_options(gkq_llhttp PRIVATE -w)

pkg_check_modules(GKQ_LIBURING IMPORTED_TARGET liburing>=2.3)
if(NOT GKQ_LIBURING_FOUND)
    message(FATAL_ERROR "GKQ_WITH_SERVER=ON needs liburing >= 2.3 (Debian package liburing-dev): run "
                        "packaging/setup-deps.sh, or configure with -DGKQ_WITH_SERVER=OFF")
endif()
