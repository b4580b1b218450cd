# Compile flags shared by every GKQ target: gkq_apply_flags(target). Third-party code (llhttp) is built without
# them; gkq_check_flags() (called at the end of the top-level CMakeLists.txt) fails the configure when a target
# of ours was added without gkq_apply_flags.
set(GKQ_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wno-unused-parameter)
if(GKQ_FATAL_WARNINGS)
    list(APPEND GKQ_WARNING_FLAGS -Werror)
endif()

function(gkq_apply_flags target)
    target_compile_options(${target} PRIVATE ${GKQ_WARNING_FLAGS})
    if(GKQ_NATIVE)
        target_compile_options(${target} PRIVATE -march=native)
    endif()
    set_property(TARGET ${target} PROPERTY GKQ_FLAGS_APPLIED ON)
endfunction()

# Targets that compile without GKQ_WARNING_FLAGS on purpose: third-party sources (gkq_llhttp, -w), or a target
# that sets its own equivalent flags (gkq_kernels_cuda: nvcc) and marks itself with GKQ_FLAGS_APPLIED.
set(GKQ_THIRD_PARTY_TARGETS gkq_llhttp)

function(gkq_check_flags_in dir)
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t IN LISTS targets)
        get_target_property(type ${t} TYPE)
        if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
            continue()
        endif()
        get_target_property(applied ${t} GKQ_FLAGS_APPLIED)
        if(NOT applied AND NOT t IN_LIST GKQ_THIRD_PARTY_TARGETS)
            message(FATAL_ERROR "target ${t} (${dir}) is built without the project's warning flags: call "
                                "gkq_apply_flags(${t}), or list it in GKQ_THIRD_PARTY_TARGETS (cmake/GkqCompile.cmake)")
        endif()
    endforeach()
    get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    foreach(sub IN LISTS subdirs)
        gkq_check_flags_in(${sub})
    endforeach()
endfunction()
function(gkq_check_flags)
    gkq_check_flags_in(${PROJECT_SOURCE_DIR})
endfunction()

if(GKQ_SANITIZE_ADDRESS)
    add_compile_options(-fsanitize=address -fno-omit-frame-pointer)
    add_link_options(-fsanitize=address)
endif()
if(GKQ_SANITIZE_UNDEFINED)
    add_compile_options(-fsanitize=undefined -fno-sanitize-recover=undefined)
    add_link_options(-fsanitize=undefined)
endif()
