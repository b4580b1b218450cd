// The libraries this engine runs with, for an About box or a bug report: each one's name and version as the library
// itself reports it at run time where it can (zlib, PCRE2, OpenBLAS with its build configuration), else the version
// of the headers it was compiled against (Eigen, nlohmann/json, header-only).
#pragma once

#include <string>
#include <vector>

namespace gkq {

struct LibraryVersion {
    std::string name;      // "zlib", "PCRE2", "OpenBLAS", "Eigen", "nlohmann/json"
    std::string version;   // as the library says it: "1.2.13", "10.42 2022-12-11", "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
    bool run_time = true;  // false: the headers' version (a header-only library)
};

std::vector<LibraryVersion> library_versions();

}  // namespace gkq
