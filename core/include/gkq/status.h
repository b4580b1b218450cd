// Status and Result<T>: how every public gkq function reports failure.
// Contract: errors carry a message that names the file, tensor, field or offset involved; nothing throws
// across the public API. `Cancelled` is not an error of the input, only the caller's choice.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace gkq {

enum class StatusCode {
    Ok,
    InvalidArgument,  // bad option or value from the caller
    NotFound,         // a file, tensor or key that does not exist
    IoError,          // the operating system refused (open, read, write, rename)
    Corrupt,          // a file whose bytes contradict its own format
    Unsupported,      // valid, but not something this version handles
    Cancelled,        // the progress callback asked to stop
    Internal,         // a bug in gkq
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
public:
    Status() = default;
    Status(StatusCode code, std::string message) : m_code(code), m_message(std::move(message)) {}

    static Status ok() { return {}; }

    bool is_ok() const { return m_code == StatusCode::Ok; }
    explicit operator bool() const { return is_ok(); }
    StatusCode code() const { return m_code; }
    const std::string& message() const { return m_message; }

    // Prefixes the message with context ("while reading X: ..."); a no-op on Ok.
    Status with_context(const std::string& context) const;

private:
    StatusCode m_code = StatusCode::Ok;
    std::string m_message;
};

inline Status error(StatusCode code, std::string message) {
    return Status(code, std::move(message));
}

template <class T>
class [[nodiscard]] Result {
public:
    Result(T value) : m_value(std::move(value)) {}          // NOLINT(google-explicit-constructor)
    Result(Status status) : m_status(std::move(status)) {}  // NOLINT(google-explicit-constructor)

    bool is_ok() const { return m_value.has_value(); }
    explicit operator bool() const { return is_ok(); }
    const Status& status() const { return m_status; }
    const std::string& message() const { return m_status.message(); }

    T& value() & { return *m_value; }
    const T& value() const& { return *m_value; }
    T&& value() && { return std::move(*m_value); }
    T& operator*() & { return *m_value; }
    const T& operator*() const& { return *m_value; }
    T* operator->() { return &*m_value; }
    const T* operator->() const { return &*m_value; }

private:
    std::optional<T> m_value;
    Status m_status;
};

}  // namespace gkq
