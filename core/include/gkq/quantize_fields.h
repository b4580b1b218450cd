// The quantize override fields as one table, in the manner of llama.cpp's tools/quantize QUANT_OPTIONS: one row
// per field of ParamOverride with its option name, value name, label, help line, kind, bounds and accepted words.
// The rows generate `gkq quantize`'s override flags and their --help lines (app/cli/cmd_quantize.cpp), the
// workbench's override controls (ui/widgets/quantize_panel.cpp), the overrides in the knot's recorded command line
// (quantize_command) and the per-layer fields of an rknot tuning (rknot_layer_overrides).
// Contract: set_override() is the one parser of an override's text, whoever gives it (a command-line value, a
// control's text, a recorded command, an rknot field): it checks the kind, the bounds and the accepted words and
// fails with InvalidArgument saying why (the caller names the flag or the JSON path). override_arguments() writes
// the set fields in table order as " --flag value" with values that set_override() reads back to the same
// override, so a recorded command line re-runs: `gkq quantize MODEL -o OUT <the recorded words after "quantize">`.
#pragma once

#include "gkq/codec.h"
#include "gkq/status.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gkq {

enum class OverrideKind : uint8_t {
    Integer,  // a decimal integer in [min_value, max_value]
    Real,     // a finite number in [min_value, max_value]
    Choice,   // one of `choices`
};

struct OverrideField {
    std::string_view flag;     // "rank": the option --rank and its name in the recorded command
    std::string_view metavar;  // "K"
    std::string_view label;    // "Rank": the workbench's label
    std::string_view help;     // one line: --help and the control's tooltip
    OverrideKind kind = OverrideKind::Integer;
    double min_value = 0.0;  // Integer, Real
    double max_value = 0.0;
    // Choice: the accepted words, in the order a list shows them; an Integer row may list the few values it admits
    // (bits: 2, 4, 8), which a list then shows.
    std::vector<std::string_view> choices;
    std::string_view example;  // a value every preset accepts alone (tests, documentation)

    // The field's value in `o` as set_override() reads it; nullopt when unset.
    std::optional<std::string> (*get)(const ParamOverride& o) = nullptr;
    // Stores an already checked value: `number` for Integer / Real, `word` for Choice. Fails for a value the
    // bounds admit but the field does not (bits 3).
    Status (*assign)(ParamOverride& o, double number, std::string_view word) = nullptr;
};

// Every row, in ParamOverride's field order (the order of the recorded command).
std::span<const OverrideField> override_fields();
// The row of `flag` ("rank", without dashes); nullptr when there is none.
const OverrideField* find_override_field(std::string_view flag);

// Parses `text` by the row's kind, bounds and words and sets the field in `o`. InvalidArgument with the reason in
// the command line's words ("'x' is not an integer", "9 is out of range [2, 8]", "3 is not 2, 4 or 8").
Status set_override(const OverrideField& field, ParamOverride& o, std::string_view text);

// " --flag value" for every set field of `o`, in table order; empty when none is set.
std::string override_arguments(const ParamOverride& o);

}  // namespace gkq
