// ArgParser: the option parser every gkq subcommand uses. Options are declared with their help text, so
// --help always lists exactly what is accepted; unknown options and missing values are errors.
// Accepts "--name value", "--name=value", short aliases ("-o FILE") and positionals in order.
#pragma once

#include "cli/exit_code.h"  // the exit codes parse() outcomes map to

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gkq::cli {

enum class ParseOutcome { Ok, Help, Error };

class ArgParser {
public:
    ArgParser(std::string usage, std::string summary);

    // names: "--json" or "-o,--output"
    void flag(const std::string& names, const std::string& help, bool* out);
    void option(const std::string& names, const std::string& metavar, const std::string& help, std::string* out);
    void option_int(const std::string& names, const std::string& metavar, const std::string& help, int64_t* out,
                    int64_t min_value, int64_t max_value);
    void option_double(const std::string& names, const std::string& metavar, const std::string& help, double* out,
                       double min_value, double max_value);
    // One of `choices` (anything else is an error naming them).
    void option_choice(const std::string& names, const std::string& metavar, const std::string& help, std::string* out,
                       std::vector<std::string> choices);
    // A comma-separated list of token ids ("1,2,3"), each in [0, 2^31).
    void option_ids(const std::string& names, const std::string& metavar, const std::string& help,
                    std::vector<int32_t>* out);
    void positional(const std::string& name, const std::string& help, std::string* out, bool required = true);
    // Every positional after the fixed ones goes into `out`; fewer than `min_count` is an error ("missing NAME").
    void positional_list(const std::string& name, const std::string& help, std::vector<std::string>* out,
                         size_t min_count = 1);

    // Parses argv[first..argc). On Help the help text was printed to stdout; on Error a one-line message
    // (plus "see --help") went to stderr.
    ParseOutcome parse(int argc, char** argv, int first = 1);
    std::string help() const;

    // "--name" was given explicitly (for options with defaults).
    bool given(const std::string& long_name) const;

private:
    struct Spec {
        std::vector<std::string> names;
        std::string metavar;  // empty for flags
        std::string help;
        std::function<bool(const std::string&, std::string&)> set;  // value -> ok, error
    };
    struct Positional {
        std::string name;
        std::string help;
        std::string* out;
        bool required;
    };
    Spec* find(const std::string& name);

    std::string m_usage;
    std::string m_summary;
    std::string m_program;
    std::vector<Spec> m_specs;
    std::vector<Positional> m_positionals;
    struct PositionalList {
        std::string name;
        std::string help;
        std::vector<std::string>* out = nullptr;
        size_t min_count = 0;
    } m_list;
    std::vector<std::string> m_given;
};

// "1,234,567"
std::string with_commas(uint64_t n);
// "1.07 MB" style, decimal units.
std::string human_bytes(uint64_t n);

}  // namespace gkq::cli
