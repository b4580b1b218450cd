// The override table (gkq/quantize_fields.h): one row per ParamOverride field, and the one parser and writer of
// their values.
#include "gkq/quantize_fields.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace gkq {

namespace {

// Shortest form that reads back the same double.
std::string number(double v) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

template <class T>
std::optional<std::string> integer_text(const std::optional<T>& v) {
    return v ? std::optional<std::string>(std::to_string(*v)) : std::nullopt;
}
std::optional<std::string> real_text(const std::optional<double>& v) {
    return v ? std::optional<std::string>(number(*v)) : std::nullopt;
}
std::optional<std::string> switch_text(const std::optional<bool>& v) {
    return v ? std::optional<std::string>(*v ? "on" : "off") : std::nullopt;
}

std::string_view target_name(LowRankTarget t) {
    return t == LowRankTarget::Weights ? "weights" : "quant-error";
}

const std::vector<std::string_view> kSwitch = {"on", "off"};

// Every knot method, in the method table's order (gkq/encoded_tensor.h): a block type chosen by --target-bpw and
// kept in an rknot is applied again by --tuning.
std::vector<std::string_view> method_choices() {
    std::vector<std::string_view> c;
    for (Method m : all_methods()) c.push_back(method_name(m));
    return c;
}

// "none", then every block type a residual can be stored in (the codec's residual table).
std::vector<std::string_view> residual_choices() {
    std::vector<std::string_view> c;
    for (ResidualKind r : all_residual_kinds()) c.push_back(residual_name(r));
    return c;
}

std::vector<OverrideField> make_fields() {
    constexpr double kMaxCount = static_cast<double>(1 << 30);
    std::vector<OverrideField> f;
    f.push_back({"method", "M", "Method",
                 "method of every matrix (overrides the preset's): f32, f16, a block type (q8_0, q4_0, q4_k ...; rows "
                 "a k-quant block does not divide fall back as llama-quantize's), lowrank or lowrank+residual",
                 OverrideKind::Choice, 0, 0, method_choices(), "q8_0",
                 [](const ParamOverride& o) {
                     return o.method ? std::optional<std::string>(std::string(method_name(*o.method))) : std::nullopt;
                 },
                 [](ParamOverride& o, double, std::string_view w) -> Status {
                     auto m = parse_method(w);
                     if (!m) return m.status();
                     o.method = *m;
                     return Status::ok();
                 }});
    f.push_back({"rank",
                 "K",
                 "Rank",
                 "fixed rank of every low-rank matrix (overrides the preset's rank rule)",
                 OverrideKind::Integer,
                 1,
                 kMaxCount,
                 {},
                 "2",
                 [](const ParamOverride& o) { return integer_text(o.rank); },
                 [](ParamOverride& o, double v, std::string_view) {
                     o.rank = static_cast<int32_t>(v);
                     return Status::ok();
                 }});
    f.push_back({"energy",
                 "E",
                 "Energy kept",
                 "rank = smallest reaching this energy fraction, in (0, 1]",
                 OverrideKind::Real,
                 1e-12,
                 1.0,
                 {},
                 "0.9",
                 [](const ParamOverride& o) { return real_text(o.energy); },
                 [](ParamOverride& o, double v, std::string_view) {
                     o.energy = v;
                     return Status::ok();
                 }});
    f.push_back({"max-rel-error",
                 "X",
                 "Max rel. error",
                 "rank = smallest whose truncation error sqrt(sum_{i>k} s_i^2 / sum s_i^2) is at most X",
                 OverrideKind::Real,
                 1e-12,
                 1.0,
                 {},
                 "0.5",
                 [](const ParamOverride& o) { return real_text(o.max_rel_error); },
                 [](ParamOverride& o, double v, std::string_view) {
                     o.max_rel_error = v;
                     return Status::ok();
                 }});
    f.push_back({"max-components",
                 "N",
                 "Max components",
                 "cap of the energy and error rank rules (0: no cap)",
                 OverrideKind::Integer,
                 0,
                 kMaxCount,
                 {},
                 "4",
                 [](const ParamOverride& o) { return integer_text(o.max_components); },
                 [](ParamOverride& o, double v, std::string_view) {
                     o.max_components = static_cast<int32_t>(v);
                     return Status::ok();
                 }});
    f.push_back({"bits",
                 "B",
                 "Factor bits",
                 "bits of the low-rank factors: 2, 4 or 8",
                 OverrideKind::Integer,
                 2,
                 8,
                 {"2", "4", "8"},
                 "4",
                 [](const ParamOverride& o) { return integer_text(o.factor_bits); },
                 [](ParamOverride& o, double v, std::string_view) -> Status {
                     const int b = static_cast<int>(v);
                     if (b != 2 && b != 4 && b != 8)
                         return error(StatusCode::InvalidArgument, std::to_string(b) + " is not 2, 4 or 8");
                     o.factor_bits = b;
                     return Status::ok();
                 }});
    f.push_back({"delta", "on|off", "Delta codes", "delta-encode the factor codes along each vector",
                 OverrideKind::Choice, 0, 0, kSwitch, "on", [](const ParamOverride& o) { return switch_text(o.delta); },
                 [](ParamOverride& o, double, std::string_view w) {
                     o.delta = w == "on";
                     return Status::ok();
                 }});
    f.push_back({"fold", "on|off", "Folding", "hierarchical folding: attention head folding, FFN run-length encoding",
                 OverrideKind::Choice, 0, 0, kSwitch, "off", [](const ParamOverride& o) { return switch_text(o.fold); },
                 [](ParamOverride& o, double, std::string_view w) {
                     o.fold = w == "on";
                     return Status::ok();
                 }});
    f.push_back({"fold-tolerance",
                 "T",
                 "Fold tolerance",
                 "max relative fit error of head folding (>= 0)",
                 OverrideKind::Real,
                 0.0,
                 1e6,
                 {},
                 "0.02",
                 [](const ParamOverride& o) { return real_text(o.fold_tolerance); },
                 [](ParamOverride& o, double v, std::string_view) {
                     o.fold_tolerance = v;
                     return Status::ok();
                 }});
    f.push_back({"sigma-quantized", "on|off", "Sigma 8-bit", "store sigma as 8-bit codes over [0, sigma_1] (off: f32)",
                 OverrideKind::Choice, 0, 0, kSwitch, "on",
                 [](const ParamOverride& o) { return switch_text(o.sigma_quantized); },
                 [](ParamOverride& o, double, std::string_view w) {
                     o.sigma_quantized = w == "on";
                     return Status::ok();
                 }});
    f.push_back({"residual", "R", "Residual",
                 "residual blocks of low-rank matrices: none or a block type (q4_0, q8_0, q4_k ...)",
                 OverrideKind::Choice, 0, 0, residual_choices(), "q8_0",
                 [](const ParamOverride& o) {
                     return o.residual ? std::optional<std::string>(std::string(residual_name(*o.residual)))
                                       : std::nullopt;
                 },
                 [](ParamOverride& o, double, std::string_view w) -> Status {
                     auto r = parse_residual(w);
                     if (!r) return r.status();
                     o.residual = *r;
                     return Status::ok();
                 }});
    f.push_back({"target",
                 "T",
                 "SVD target",
                 "what the SVD decomposes: weights, or quant-error (the residual's quantization error; needs a "
                 "residual)",
                 OverrideKind::Choice,
                 0,
                 0,
                 {"weights", "quant-error"},
                 "weights",
                 [](const ParamOverride& o) {
                     return o.target ? std::optional<std::string>(std::string(target_name(*o.target))) : std::nullopt;
                 },
                 [](ParamOverride& o, double, std::string_view w) {
                     o.target = w == "weights" ? LowRankTarget::Weights : LowRankTarget::QuantError;
                     return Status::ok();
                 }});
    return f;
}

const std::vector<OverrideField>& fields() {
    static const std::vector<OverrideField> f = make_fields();
    return f;
}

}  // namespace

std::span<const OverrideField> override_fields() {
    return fields();
}

const OverrideField* find_override_field(std::string_view flag) {
    for (const OverrideField& f : fields())
        if (f.flag == flag) return &f;
    return nullptr;
}

Status set_override(const OverrideField& field, ParamOverride& o, std::string_view text) {
    const std::string v(text);
    auto bad = [](const std::string& why) { return error(StatusCode::InvalidArgument, why); };
    switch (field.kind) {
        case OverrideKind::Integer: {
            int64_t x = 0;
            auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
            if (ec != std::errc() || p != v.data() + v.size()) return bad("'" + v + "' is not an integer");
            const auto lo = static_cast<int64_t>(field.min_value), hi = static_cast<int64_t>(field.max_value);
            if (x < lo || x > hi)
                return bad(std::to_string(x) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                           "]");
            return field.assign(o, static_cast<double>(x), {});
        }
        case OverrideKind::Real: {
            char* end = nullptr;
            const double x = std::strtod(v.c_str(), &end);
            if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(x))
                return bad("'" + v + "' is not a number");
            if (x < field.min_value || x > field.max_value) {
                char buf[128];
                std::snprintf(buf, sizeof buf, "%g is out of range [%g, %g]", x, field.min_value, field.max_value);
                return bad(buf);
            }
            return field.assign(o, x, {});
        }
        case OverrideKind::Choice: {
            std::string list;
            for (std::string_view c : field.choices) {
                if (c == text) return field.assign(o, 0.0, text);
                list += (list.empty() ? "" : ", ") + std::string(c);
            }
            return bad("'" + v + "' is not one of " + list);
        }
    }
    return bad("unknown kind");
}

std::string override_arguments(const ParamOverride& o) {
    std::string s;
    for (const OverrideField& f : fields())
        if (auto v = f.get(o)) s += " --" + std::string(f.flag) + " " + *v;
    return s;
}

}  // namespace gkq
