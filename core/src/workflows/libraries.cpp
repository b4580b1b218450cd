#include "gkq/libraries.h"

#include <cblas.h>
#include <zlib.h>
#include <Eigen/Core>
#include <nlohmann/json.hpp>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>

namespace gkq {

std::vector<LibraryVersion> library_versions() {
    std::vector<LibraryVersion> out;
    out.push_back({"zlib", zlibVersion(), true});
    std::array<char, 64> pcre{};  // PCRE2_CONFIG_VERSION: "10.42 2022-12-11", at most 24 code units
    if (pcre2_config(PCRE2_CONFIG_VERSION, pcre.data()) > 0) out.push_back({"PCRE2", pcre.data(), true});
    const char* blas = openblas_get_config();
    out.push_back({"OpenBLAS", blas != nullptr ? blas : "", true});
    out.push_back({"Eigen",
                   std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
                       std::to_string(EIGEN_MINOR_VERSION),
                   false});
    out.push_back({"nlohmann/json",
                   std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." + std::to_string(NLOHMANN_JSON_VERSION_MINOR) +
                       "." + std::to_string(NLOHMANN_JSON_VERSION_PATCH),
                   false});
    return out;
}

}  // namespace gkq
