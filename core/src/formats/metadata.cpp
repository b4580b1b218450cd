#include "gkq/metadata.h"

#include <cstdio>

namespace gkq {

std::string_view meta_type_name(MetaType t) {
    switch (t) {
        case MetaType::U8: return "u8";
        case MetaType::I8: return "i8";
        case MetaType::U16: return "u16";
        case MetaType::I16: return "i16";
        case MetaType::U32: return "u32";
        case MetaType::I32: return "i32";
        case MetaType::F32: return "f32";
        case MetaType::Bool: return "bool";
        case MetaType::String: return "string";
        case MetaType::Array: return "array";
        case MetaType::U64: return "u64";
        case MetaType::I64: return "i64";
        case MetaType::F64: return "f64";
    }
    return "?";
}

MetaValue MetaValue::of_string(std::string s) {
    MetaValue v;
    v.type = MetaType::String;
    v.scalar = std::move(s);
    return v;
}

MetaValue MetaValue::of_int(int64_t x) {
    MetaValue v;
    v.type = MetaType::I64;
    v.scalar = x;
    return v;
}

MetaValue MetaValue::of_uint(uint64_t x, MetaType t) {
    MetaValue v;
    v.type = t;
    v.scalar = x;
    return v;
}

MetaValue MetaValue::of_float(double x, MetaType t) {
    MetaValue v;
    v.type = t;
    v.scalar = x;
    return v;
}

MetaValue MetaValue::of_bool(bool b) {
    MetaValue v;
    v.type = MetaType::Bool;
    v.scalar = b;
    return v;
}

std::optional<int64_t> MetaValue::as_int() const {
    if (const auto* u = std::get_if<uint64_t>(&scalar)) {
        if (type == MetaType::Array || *u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
        return static_cast<int64_t>(*u);
    }
    if (const auto* i = std::get_if<int64_t>(&scalar)) return *i;
    return std::nullopt;
}

std::optional<double> MetaValue::as_float() const {
    if (type == MetaType::Array) return std::nullopt;
    if (const auto* d = std::get_if<double>(&scalar)) return *d;
    if (const auto* u = std::get_if<uint64_t>(&scalar)) return static_cast<double>(*u);
    if (const auto* i = std::get_if<int64_t>(&scalar)) return static_cast<double>(*i);
    return std::nullopt;
}

const std::string* MetaValue::as_string() const {
    if (type != MetaType::String) return nullptr;
    return std::get_if<std::string>(&scalar);
}

std::string MetaValue::to_display(size_t max_items) const {
    if (type == MetaType::Array) {
        std::string s = "[";
        for (size_t i = 0; i < array.size() && i < max_items; ++i) {
            if (i) s += ", ";
            s += array[i].to_display(max_items);
        }
        if (array.size() > max_items) s += ", ...";
        s += "] (" + std::to_string(array.size()) + " x " + std::string(meta_type_name(array_type)) + ")";
        return s;
    }
    if (const auto* str = std::get_if<std::string>(&scalar)) {
        std::string s = "\"";
        for (char c : *str) {
            if (s.size() > 80) {
                s += "...";
                break;
            }
            if (static_cast<unsigned char>(c) < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
                s += buf;
            } else {
                s += c;
            }
        }
        return s + "\"";
    }
    if (const auto* b = std::get_if<bool>(&scalar)) return *b ? "true" : "false";
    if (const auto* d = std::get_if<double>(&scalar)) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.9g", *d);
        return buf;
    }
    if (const auto* u = std::get_if<uint64_t>(&scalar)) return std::to_string(*u);
    if (const auto* i = std::get_if<int64_t>(&scalar)) return std::to_string(*i);
    return "?";
}

const MetaValue* Metadata::find(std::string_view key) const {
    for (const auto& [k, v] : entries)
        if (k == key) return &v;
    return nullptr;
}

void Metadata::set(std::string key, MetaValue value) {
    for (auto& [k, v] : entries) {
        if (k == key) {
            v = std::move(value);
            return;
        }
    }
    entries.emplace_back(std::move(key), std::move(value));
}

}  // namespace gkq
