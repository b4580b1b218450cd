// How the workbench writes numbers and tensor names, in one place: every table and label that shows a measured
// value formats it here, so a value reads the same in the tensor table, the quantize and compare results and
// the totals rows (significant digits, thousands separators in the user's locale, or ',' where it has none).
// shortTensorName gives the tree's short names through the architecture table (gkq/arch.h): any stored name of a
// known tensor, HF or GGUF, becomes its GGUF name without the ".weight" suffix ("blk.3.ffn_up", "token_embd").
#pragma once

#include <QLocale>
#include <QString>
#include <string_view>

namespace gkq {
struct ArchSpec;
}

namespace gkq::ui {

// The locale numbers are written in: the user's, always with group separators.
QLocale displayLocale();
// An integer with thousands separators: "1,234,567".
QString formatCount(qint64 value);
QString formatCount(quint64 value);
// `significant` significant digits, thousands separators, no exponent between 1e-4 and 1e15 ("0.0001234",
// "3.142", "54.12", "1,235"); an exponent outside ("1.234e-07"); "0" for zero, "nan"/"inf" as such.
QString formatNumber(double value, int significant = 4);
// The tensor's short name for the model browser; the stored name itself when the table does not know it.
QString shortTensorName(const ArchSpec& arch, std::string_view stored);

}  // namespace gkq::ui
