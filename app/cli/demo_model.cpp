#include "cli/demo_model.h"

#include <filesystem>
#include <vector>

namespace gkq::cli {

namespace fs = std::filesystem;

std::string demo_model_dir() {
    std::error_code ec;
    std::vector<fs::path> candidates;
    // The installed copy first: an installed gkq must not open a source tree that happens to still exist (a build
    // tree has no share/gkq/demo beside its binary, so it falls through to the source tree's copy).
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) candidates.push_back(exe.parent_path() / ".." / "share" / "gkq" / "demo");
#ifdef GKQ_DEMO_MODEL_DIR
    candidates.emplace_back(GKQ_DEMO_MODEL_DIR);
#endif
    for (const fs::path& dir : candidates)
        if (fs::is_regular_file(dir / "model.safetensors", ec)) return fs::weakly_canonical(dir, ec).string();
    return {};
}

std::string demo_model_help() {
    const std::string dir = demo_model_dir();
    if (dir.empty()) return "(no bundled demo model was found, so MODEL is required)";
    return "(default: the bundled demo model, " + dir + ")";
}

}  // namespace gkq::cli
