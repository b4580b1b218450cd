# Packaging: the Debian package (CPack DEB) and the packaging tests (tests/packaging, label "packaging").
#
#   cmake --build build && cpack --config build/CPackConfig.cmake -B build/package
#
# The package installs gkq and gkq-workbench into /usr/bin, the demo model into /usr/share/gkq/demo (found by both
# programs relative to their own location, ../share/gkq/demo), the manual into /usr/share/doc/gkq (README.md and
# docs/), a desktop entry and a scalable icon. Its Depends line
# is computed by dpkg-shlibdeps from the binaries (Qt, zlib, OpenBLAS, LAPACKE, liburing, libstdc++...), plus
# qt6-qpa-plugins, which the workbench loads at run time and so no shared-library scan can see.
if(NOT GKQ_BUILD_APP)
    return()
endif()

include(GNUInstallDirs)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/deb/gkq-workbench.desktop
        DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/deb/gkq-workbench.svg
        DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)

# The manual (Help > Manual renders it in the workbench): README.md and docs/, with the screenshots the README shows.
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/gkq)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/gkq/docs)

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "gkq-workbench")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "spectral compression of transformer weights, measured")
set(CPACK_PACKAGE_DESCRIPTION
    "GKQ Workbench truncates, folds and quantizes the weight matrices of LLaMA-architecture models and measures what
the compression costs (spectra, KL divergence, perplexity). gkq is the command line (inspect, analyze, quantize,
eval, generate, serve); gkq-workbench is the Qt 6 desktop workbench. A tiny demo model is included.")
set(CPACK_PACKAGE_CONTACT "GKQ Workbench maintainers <gkq@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "science")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
# dpkg-shlibdeps turns every shared library the binaries link into a versioned package dependency.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "qt6-qpa-plugins")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "xvfb")
set(CPACK_RESOURCE_FILE_README "${PROJECT_SOURCE_DIR}/README.md")
include(CPack)

if(GKQ_BUILD_TESTS)
    add_subdirectory(${PROJECT_SOURCE_DIR}/tests/packaging ${PROJECT_BINARY_DIR}/tests/packaging)
endif()
