// gkq verify IN.knot [--json]: open a knot and check every record — CRC32, descriptor against the index, payload
// inflates and decodes — reporting each bad record and the counts.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/progress_bar.h"

#include "gkq/knot.h"
#include "gkq/quantize.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>

namespace gkq::cli {

int cmd_verify(int argc, char** argv) {
    std::string path;
    bool json = false;
    int64_t threads = 0;
    ArgParser p(
        "gkq verify IN.knot [--json]",
        "Checks a knot (or .knot.gz) completely: magic, version, header, index, then every record's CRC32,\n"
        "its descriptor against the index, and that its payload inflates and decodes to float32. Prints the\n"
        "counts; each bad record is named on stderr, and the exit code is 2 if there is any. A whole knot whose\n"
        "records do not make a runnable model (a missing tensor, a shape its config contradicts) fails too.");
    p.positional("IN.knot", "knot file to check", &path);
    p.flag("--json", "print one JSON document (counts, failures[]) instead of text", &json);
    p.option_int("--threads", "N", "worker threads (0: one per CPU)", &threads, 0, 4096);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    Result<VerifyReport> report = error(StatusCode::Internal, "not run");
    {
        ProgressBar bar("verify");
        report = verify_knot(path, static_cast<int>(threads), bar.callback());
    }
    if (!report) {
        std::fprintf(stderr, "gkq verify: %s\n", report.message().c_str());
        return exit_code(report.status());
    }
    const VerifyReport& r = *report;
    for (const std::string& f : r.failures) std::fprintf(stderr, "gkq verify: %s\n", f.c_str());
    if (json) {
        nlohmann::json by_method = nlohmann::json::object();
        for (size_t m = 0; m < r.count_by_method.size(); ++m)
            if (r.count_by_method[m] > 0)
                by_method[std::string(method_name(static_cast<Method>(m)))] = r.count_by_method[m];
        nlohmann::json j = {{"path", r.path},
                            {"ok", r.ok()},
                            {"file_bytes", r.file_bytes},
                            {"gzipped", r.gzipped},
                            {"shard", {{"index", r.shard_index}, {"count", r.shard_count}}},
                            {"n_records", r.n_records},
                            {"n_ok", r.n_ok},
                            {"records_by_method", by_method},
                            {"n_params", r.n_params},
                            {"stored_bytes", r.stored_bytes},
                            {"raw_bytes", r.raw_bytes},
                            {"failures", r.failures}};
        std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
        std::printf("knot     %s (%s bytes%s)\n", r.path.c_str(), with_commas(r.file_bytes).c_str(),
                    r.gzipped ? " inflated from gzip" : "");
        if (r.shard_count > 1) std::printf("shard    %u/%u\n", r.shard_index, r.shard_count);
        std::printf("records  %zu, %zu ok:", r.n_records, r.n_ok);
        for (size_t m = 0; m < r.count_by_method.size(); ++m)
            if (r.count_by_method[m] > 0)
                std::printf(" %s %zu", std::string(method_name(static_cast<Method>(m))).c_str(), r.count_by_method[m]);
        std::printf("\nparams   %s; payloads %s bytes stored, %s inflated\n",
                    with_commas(static_cast<uint64_t>(r.n_params)).c_str(), with_commas(r.stored_bytes).c_str(),
                    with_commas(r.raw_bytes).c_str());
        // Failures are one per bad record, then the model-consistency problems (the model cannot run).
        const size_t bad = r.n_records - r.n_ok;
        const size_t problems = r.failures.size() - std::min(bad, r.failures.size());
        std::string result = r.ok() ? "ok" : bad > 0 ? std::to_string(bad) + " bad records" : "";
        if (problems > 0)
            result += std::string(result.empty() ? "" : "; ") + "the model cannot run (" + std::to_string(problems) +
                      (problems == 1 ? " problem)" : " problems)");
        std::printf("result   %s\n", result.c_str());
    }
    return r.ok() ? kExitOk : kExitBadInput;
}

}  // namespace gkq::cli
