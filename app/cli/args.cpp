#include "cli/args.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace gkq::cli {

namespace {
std::vector<std::string> split_names(const std::string& names) {
    std::vector<std::string> out;
    std::stringstream ss(names);
    std::string item;
    while (std::getline(ss, item, ',')) out.push_back(item);
    return out;
}
}  // namespace

ArgParser::ArgParser(std::string usage, std::string summary)
    : m_usage(std::move(usage)), m_summary(std::move(summary)) {
    m_specs.push_back({{"-h", "--help"}, "", "show this help and exit", nullptr});
}

void ArgParser::flag(const std::string& names, const std::string& help, bool* out) {
    m_specs.push_back({split_names(names), "", help, [out](const std::string&, std::string&) {
                           *out = true;
                           return true;
                       }});
}

void ArgParser::option(const std::string& names, const std::string& metavar, const std::string& help,
                       std::string* out) {
    m_specs.push_back({split_names(names), metavar, help, [out](const std::string& v, std::string&) {
                           *out = v;
                           return true;
                       }});
}

void ArgParser::option_int(const std::string& names, const std::string& metavar, const std::string& help, int64_t* out,
                           int64_t min_value, int64_t max_value) {
    m_specs.push_back({split_names(names), metavar, help, [=](const std::string& v, std::string& err) {
                           int64_t x = 0;
                           auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
                           if (ec != std::errc() || p != v.data() + v.size()) {
                               err = "'" + v + "' is not an integer";
                               return false;
                           }
                           if (x < min_value || x > max_value) {
                               err = std::to_string(x) + " is out of range [" + std::to_string(min_value) + ", " +
                                     std::to_string(max_value) + "]";
                               return false;
                           }
                           *out = x;
                           return true;
                       }});
}

void ArgParser::option_ids(const std::string& names, const std::string& metavar, const std::string& help,
                           std::vector<int32_t>* out) {
    m_specs.push_back({split_names(names), metavar, help, [=](const std::string& v, std::string& err) {
                           std::vector<int32_t> ids;
                           size_t begin = 0;
                           while (begin <= v.size()) {
                               size_t end = v.find(',', begin);
                               if (end == std::string::npos) end = v.size();
                               int32_t x = 0;
                               auto [p, ec] = std::from_chars(v.data() + begin, v.data() + end, x);
                               if (ec != std::errc() || p != v.data() + end || x < 0) {
                                   err = "'" + v.substr(begin, end - begin) + "' (item " +
                                         std::to_string(ids.size() + 1) + " of '" + v +
                                         "') is not a token id (a non-negative integer below 2^31)";
                                   return false;
                               }
                               ids.push_back(x);
                               begin = end + 1;
                           }
                           *out = std::move(ids);
                           return true;
                       }});
}

void ArgParser::option_choice(const std::string& names, const std::string& metavar, const std::string& help,
                              std::string* out, std::vector<std::string> choices) {
    m_specs.push_back({split_names(names), metavar, help, [out, choices](const std::string& v, std::string& err) {
                           for (const std::string& c : choices)
                               if (v == c) {
                                   *out = v;
                                   return true;
                               }
                           err = "'" + v + "' is not one of";
                           for (size_t i = 0; i < choices.size(); ++i) err += (i ? ", " : " ") + choices[i];
                           return false;
                       }});
}

void ArgParser::option_double(const std::string& names, const std::string& metavar, const std::string& help,
                              double* out, double min_value, double max_value) {
    m_specs.push_back({split_names(names), metavar, help, [=](const std::string& v, std::string& err) {
                           char* end = nullptr;
                           double x = std::strtod(v.c_str(), &end);
                           if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(x)) {
                               err = "'" + v + "' is not a number";
                               return false;
                           }
                           if (x < min_value || x > max_value) {
                               char buf[128];
                               std::snprintf(buf, sizeof buf, "%g is out of range [%g, %g]", x, min_value, max_value);
                               err = buf;
                               return false;
                           }
                           *out = x;
                           return true;
                       }});
}

void ArgParser::positional(const std::string& name, const std::string& help, std::string* out, bool required) {
    m_positionals.push_back({name, help, out, required});
}

void ArgParser::positional_list(const std::string& name, const std::string& help, std::vector<std::string>* out,
                                size_t min_count) {
    m_list = {name, help, out, min_count};
}

ArgParser::Spec* ArgParser::find(const std::string& name) {
    for (auto& s : m_specs)
        if (std::find(s.names.begin(), s.names.end(), name) != s.names.end()) return &s;
    return nullptr;
}

bool ArgParser::given(const std::string& long_name) const {
    return std::find(m_given.begin(), m_given.end(), long_name) != m_given.end();
}

ParseOutcome ArgParser::parse(int argc, char** argv, int first) {
    m_program = argc > 0 ? argv[0] : "gkq";
    auto fail = [&](const std::string& msg) {
        std::fprintf(stderr, "gkq: %s\n(see '%s --help')\n", msg.c_str(),
                     m_usage.substr(0, m_usage.find(' ', 4)).c_str());
        return ParseOutcome::Error;
    };
    size_t n_pos = 0;
    bool only_positionals = false;
    for (int i = first; i < argc; ++i) {
        std::string arg = argv[i];
        if (!only_positionals && arg == "--") {
            only_positionals = true;
            continue;
        }
        if (!only_positionals && arg.size() > 1 && arg[0] == '-') {
            std::string name = arg, value;
            bool has_value = false;
            if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
                name = arg.substr(0, eq);
                value = arg.substr(eq + 1);
                has_value = true;
            }
            Spec* s = find(name);
            if (!s) return fail("unknown option '" + name + "'");
            if (name == "-h" || name == "--help") {
                std::fputs(help().c_str(), stdout);
                return ParseOutcome::Help;
            }
            m_given.push_back(s->names.back());
            if (s->metavar.empty()) {
                if (has_value) return fail("option '" + name + "' takes no value");
                std::string err;
                s->set("", err);
                continue;
            }
            if (!has_value) {
                if (i + 1 >= argc) return fail("option '" + name + "' needs a value (" + s->metavar + ")");
                value = argv[++i];
            }
            std::string err;
            if (!s->set(value, err)) return fail("option '" + name + "': " + err);
            continue;
        }
        if (n_pos >= m_positionals.size()) {
            if (m_list.out == nullptr) return fail("unexpected argument '" + arg + "'");
            m_list.out->push_back(arg);
            continue;
        }
        *m_positionals[n_pos++].out = arg;
    }
    for (size_t i = n_pos; i < m_positionals.size(); ++i)
        if (m_positionals[i].required) return fail("missing " + m_positionals[i].name);
    if (m_list.out != nullptr && m_list.out->size() < m_list.min_count) return fail("missing " + m_list.name);
    return ParseOutcome::Ok;
}

std::string ArgParser::help() const {
    std::string h = "usage: " + m_usage + "\n\n" + m_summary + "\n";
    if (!m_positionals.empty()) {
        h += "\narguments:\n";
        for (const auto& p : m_positionals) {
            std::string left = "  " + p.name;
            left.resize(std::max<size_t>(left.size() + 2, 26), ' ');
            h += left + p.help + (p.required ? "" : " (optional)") + "\n";
        }
    }
    if (m_list.out != nullptr) {
        if (m_positionals.empty()) h += "\narguments:\n";
        std::string left = "  " + m_list.name + "...";
        left.resize(std::max<size_t>(left.size() + 2, 26), ' ');
        h += left + m_list.help + "\n";
    }
    h += "\noptions:\n";
    for (const auto& s : m_specs) {
        std::string left = "  ";
        for (size_t i = 0; i < s.names.size(); ++i) left += (i ? ", " : "") + s.names[i];
        if (!s.metavar.empty()) left += " " + s.metavar;
        left.resize(std::max<size_t>(left.size() + 2, 26), ' ');
        h += left + s.help + "\n";
    }
    return h;
}

std::string with_commas(uint64_t n) {
    std::string s = std::to_string(n);
    for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
    return s;
}

std::string human_bytes(uint64_t n) {
    const char* units[] = {"B", "kB", "MB", "GB", "TB"};
    double v = static_cast<double>(n);
    int u = 0;
    while (v >= 1000.0 && u < 4) {
        v /= 1000.0;
        ++u;
    }
    char buf[32];
    if (u == 0)
        std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
    else
        std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
    return buf;
}

}  // namespace gkq::cli
