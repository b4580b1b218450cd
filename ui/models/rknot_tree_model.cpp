#include "models/rknot_tree_model.h"

#include <nlohmann/json.hpp>

#include <QFont>
#include <QHash>
#include <QUndoCommand>
#include <QUndoStack>
#include <algorithm>
#include <functional>

namespace gkq::ui {

using nlohmann::json;

namespace {

// ---- the schema as shown (docs/rknot-format.md) ----------------------------------------------------------------
// Presentation only: which fields the editor lets the user change, and the type / range / meaning it displays.
// Whether a value is acceptable is decided by the core (rknot_set), never by this table.

struct FieldInfo {
    const char* pattern;  // JSON path with array indices written as []
    const char* type;
    const char* allowed;
    bool editable;
    const char* note;       // how the value is obtained
    const char* null_note;  // why it is null, when it is
};

// In document order: object members are shown in this order.
const FieldInfo kFields[] = {
    {"model_name", "string", "non-empty", true, "user-set (default: the knot's file name)", nullptr},
    {"version", "string", "\"1.0\"", false, "format version", nullptr},
    {"compression", "object", "", false, "", nullptr},
    {"compression.method", "string", "", false, "measured: the knot header's command", nullptr},
    {"compression.spectral_ratio", "number or null", "> 0", false,
     "measured: sum rows*cols / sum rank*(rows+cols+1) over the low-rank records", "the knot has no low-rank records"},
    {"compression.hierarchical_ratio", "null", "null only", false, "",
     "the knot does not record a record's size without folding"},
    {"compression.total_compression", "number or null", "> 0", false, "measured: 4 x n_params / knot file bytes",
     "not measured"},
    {"folded_waves", "object", "", false, "one entry per weight matrix of the knot", nullptr},
    {"folded_waves.layers", "array", "", false, "in record order", nullptr},
    {"folded_waves.layers[]", "object", "", false, "one weight matrix", nullptr},
    {"folded_waves.layers[].layer_id", "integer", "[-1, 65535]", false,
     "measured: transformer block (-1 outside the blocks)", nullptr},
    {"folded_waves.layers[].tensor", "string", "", false, "measured: record name in the knot", nullptr},
    {"folded_waves.layers[].role", "string", "a matrix role", false, "measured: the tensor's role", nullptr},
    {"folded_waves.layers[].method", "string",
     "one of f32, f16, q8_0, q4_0, lowrank, lowrank+residual, q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k",
     true, "tuning: the method the next quantization uses for this matrix", nullptr},
    {"folded_waves.layers[].rank", "integer", "[0, 1073741824]", true,
     "tuning: low-rank k of the next quantization (0: the preset's rank rule)", nullptr},
    {"folded_waves.layers[].bit_width", "integer or null", "one of 2, 4, 8", true,
     "tuning: bits of the low-rank factors", "not a low-rank record: the preset's factor bits apply"},
    {"folded_waves.layers[].base_singular_values", "array of numbers", "<= 8 numbers >= 0, descending", false,
     "measured: the top singular values of the matrix", nullptr},
    {"folded_waves.layers[].base_singular_values[]", "number", ">= 0", false, "measured singular value", nullptr},
    {"folded_waves.layers[].spectral_decay_ratio", "number or null", "(0, 1]", false,
     "derived: exp(b) of the least-squares fit ln s_i = a + b i",
     "fewer than 3 positive singular values, or a flat spectrum"},
    {"folded_waves.layers[].num_levels", "integer", "[0, 64]", false,
     "derived: levels of the rank ladder 1, 2, 4, ... <= min(rows, cols)", nullptr},
    {"folded_waves.layers[].level_residuals", "array of numbers", "num_levels numbers in [0, 1]", false,
     "derived: relative error of the best rank-2^l approximation (Eckart-Young)", nullptr},
    {"folded_waves.layers[].level_residuals[]", "number", "[0, 1]", false, "relative error at rank 2^l", nullptr},
    {"folded_waves.layers[].is_self_similar", "boolean or null", "self_similarity_confidence >= 0.95", false,
     "derived: the fit's R^2 >= 0.95", "no decay fit (see spectral_decay_ratio)"},
    {"folded_waves.layers[].self_similarity_confidence", "number or null", "[0, 1]", false,
     "derived: R^2 of the decay fit", "no decay fit (see spectral_decay_ratio)"},
    {"folded_waves.layers[].rel_error", "number or null", ">= 0", false,
     "measured: ||W - W'||_F / ||W||_F of the decoded record", "encoded without the source model (--model)"},
    {"folded_waves.layers[].expected_accuracy_loss", "number or null", ">= 0", true,
     "user-set: a loss measured by ablating this matrix", "not measured: no per-matrix evaluation exists"},
    {"saturation_maps", "object or null", "", false, "from a saturation profile (gkq profile)",
     "encoded without a saturation profile (--profile)"},
    {"saturation_maps.version", "string", "\"1.0\"", false, "", nullptr},
    {"saturation_maps.compression", "string", "\"run-length encoded\"", false, "", nullptr},
    {"saturation_maps.source", "string", "", false, "the masks file", nullptr},
    {"saturation_maps.command", "string", "", false, "the profile command", nullptr},
    {"saturation_maps.n_tokens", "integer", ">= 1", false, "measured: calibration tokens", nullptr},
    {"saturation_maps.layers", "array", "", false, "one mask per transformer block", nullptr},
    {"saturation_maps.layers[]", "object", "", false, "", nullptr},
    {"saturation_maps.layers[].layer_id", "integer", "[0, 65535]", false, "transformer block", nullptr},
    {"saturation_maps.layers[].bitmask_hash", "string", "\"sha256:\" + 64 hex digits", false,
     "derived: SHA-256 of the packed mask", nullptr},
    {"saturation_maps.layers[].compressed_size_bytes", "integer", ">= 0", false, "derived: LEB128 bytes of the runs",
     nullptr},
    {"saturation_maps.layers[].neuron_count", "integer", "[1, 1073741824]", false, "FFN hidden size", nullptr},
    {"saturation_maps.layers[].saturation_threshold", "number", ">= 0", false, "the profile's threshold T", nullptr},
    {"saturation_maps.layers[].min_frequency", "number", "[0, 1)", false, "the profile's minimum frequency F", nullptr},
    {"saturation_maps.layers[].scale", "number", ">= 0", false, "measured: the block's activation RMS", nullptr},
    {"saturation_maps.layers[].hot_count", "integer", "the runs' hot neurons", false, "measured: hot neurons", nullptr},
    {"saturation_maps.layers[].runs", "array of integers", "[0, 2^32), cold first, covering neuron_count", false,
     "measured: the run-length encoded mask", nullptr},
    {"saturation_maps.layers[].runs[]", "integer", "[0, 4294967295]", false, "run length", nullptr},
    {"quality_metrics", "object", "", false, "", nullptr},
    {"quality_metrics.gnosis_efficiency", "null", "null only", false, "",
     "no definition over measured values (docs/rknot-format.md)"},
    {"quality_metrics.data_quality_score", "null", "null only", false, "",
     "no definition over measured values (docs/rknot-format.md)"},
    {"quality_metrics.learning_efficiency", "null", "null only", false, "",
     "no definition over measured values (docs/rknot-format.md)"},
    {"quality_metrics.resonance_stability", "null", "null only", false, "",
     "no definition over measured values (docs/rknot-format.md)"},
    {"quality_metrics.overall_quality", "number or null", "[0, 1], = exp(-measured.eval.kld_mean)", false,
     "derived: exp(-measured.eval.kld_mean)", "no evaluation (measured.eval.kld_mean is null)"},
    {"quality_metrics.recommended_bit_width", "null", "null only", false, "",
     "would need a bit-width sweep with a quality target; not measured"},
    {"quality_metrics.safe_for_aggressive_quantization", "null", "null only", false, "",
     "would need a bit-width sweep with a quality target; not measured"},
    {"resonance_tuning", "object", "", false, "user-set training hyperparameters", nullptr},
    {"resonance_tuning.optimal_learning_rate", "number or null", "(0, 1]", true, "user-set", "not set"},
    {"resonance_tuning.resonance_frequency", "number or null", "(0, 1]", true, "user-set", "not set"},
    {"resonance_tuning.spectral_lambda", "number or null", "[0, 100]", true, "user-set", "not set"},
    {"resonance_tuning.l2_lambda", "number or null", "[0, 100]", true, "user-set", "not set"},
    {"resonance_tuning.expected_cliff_emergence_epoch", "integer or null", "[0, 1000000]", true, "user-set", "not set"},
    {"measured", "object", "", false, "what the rknot was made from", nullptr},
    {"measured.knot", "string", "", false, "the knot file it was encoded from", nullptr},
    {"measured.knot_command", "string", "", false, "the knot's header command", nullptr},
    {"measured.encode_command", "string", "", false, "the encode command", nullptr},
    {"measured.n_params", "integer", ">= 0", false, "measured: elements of all records", nullptr},
    {"measured.file_bytes", "integer", ">= 0", false, "measured: knot size in bytes", nullptr},
    {"measured.bits_per_weight", "number", ">= 0", false, "derived: 8 x file_bytes / n_params", nullptr},
    {"measured.spectrum_source", "string", "\"model\" or \"knot\"", false,
     "where the spectra come from: the source matrices or the decoded records", nullptr},
    {"measured.eval", "object or null", "", false, "from an evaluation report (gkq eval --json)",
     "encoded without an evaluation report (--eval)"},
    {"measured.eval.source", "string", "", false, "the report file", nullptr},
    {"measured.eval.command", "string", "", false, "the evaluation command", nullptr},
    {"measured.eval.kld_mean", "number or null", ">= 0", false, "measured: mean KL divergence",
     "missing from the report"},
    {"measured.eval.kld_mean_se", "number or null", ">= 0", false, "measured: its standard error",
     "missing from the report"},
    {"measured.eval.kld_p99", "number or null", ">= 0", false, "measured: 99th percentile KLD",
     "missing from the report"},
    {"measured.eval.kld_p999", "number or null", ">= 0", false, "measured: 99.9th percentile KLD",
     "missing from the report"},
    {"measured.eval.top1_agreement", "number or null", "[0, 1]", false, "measured: same top token",
     "missing from the report"},
    {"measured.eval.ppl_ratio", "number or null", "> 0", false, "measured: perplexity ratio",
     "missing from the report"},
    {"measured.eval.n_tokens", "integer or null", ">= 0", false, "measured: scored tokens", "missing from the report"},
};

// folded_waves.layers[3].bit_width -> folded_waves.layers[].bit_width
QString patternOf(const QString& path) {
    QString out;
    out.reserve(path.size());
    bool inIndex = false;
    for (QChar c : path) {
        if (c == QLatin1Char('[')) {
            inIndex = true;
            out += c;
        } else if (c == QLatin1Char(']')) {
            inIndex = false;
            out += c;
        } else if (!inIndex) {
            out += c;
        }
    }
    return out;
}

// Position in kFields (its order), -1 when the path is not in the schema.
int fieldIndex(const QString& path) {
    static const QHash<QString, int> byPattern = [] {
        QHash<QString, int> h;
        for (int i = 0; i < static_cast<int>(std::size(kFields)); ++i) h.insert(QLatin1String(kFields[i].pattern), i);
        return h;
    }();
    return byPattern.value(patternOf(path), -1);
}

const FieldInfo* fieldInfo(const QString& path) {
    const int i = fieldIndex(path);
    return i < 0 ? nullptr : &kFields[i];
}

QString text(const std::string& s) {
    return QString::fromStdString(s);
}

std::string dumpValue(const json& v) {
    return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Parses the core's JSON of `r` (never fails for a document the core wrote).
json documentOf(const Rknot& r) {
    json doc = json::parse(rknot_to_json(r, -1), nullptr, false);
    return doc.is_discarded() ? json::object() : doc;
}

// Diff of two JSON values, leaves only; `out` gets (path, a, b) for each difference.
void diffValues(const json& a, const json& b, const std::string& path, std::vector<RknotTreeModel::Change>& out) {
    if (a.is_object() && b.is_object()) {
        std::vector<std::string> keys;
        for (auto it = a.begin(); it != a.end(); ++it) keys.push_back(it.key());
        for (auto it = b.begin(); it != b.end(); ++it)
            if (!a.contains(it.key())) keys.push_back(it.key());
        std::stable_sort(keys.begin(), keys.end(), [&](const std::string& x, const std::string& y) {
            const auto rank = [&](const std::string& k) {
                const int i = fieldIndex(text(path.empty() ? k : path + "." + k));
                return i < 0 ? static_cast<int>(std::size(kFields)) : i;
            };
            return rank(x) < rank(y);
        });
        for (const std::string& k : keys) {
            const std::string p = path.empty() ? k : path + "." + k;
            const json absent;
            diffValues(a.contains(k) ? a[k] : absent, b.contains(k) ? b[k] : absent, p, out);
        }
        return;
    }
    if (a.is_array() && b.is_array() && a.size() == b.size()) {
        for (size_t i = 0; i < a.size(); ++i) diffValues(a[i], b[i], path + "[" + std::to_string(i) + "]", out);
        return;
    }
    if (a != b) out.push_back({text(path), text(dumpValue(a)), text(dumpValue(b))});
}

// One edit on the undo stack: the leaf's JSON literal before and after.
class SetFieldCommand : public QUndoCommand {
public:
    SetFieldCommand(RknotTreeModel* model, QString path, QString before, QString after)
        : m_model(model), m_path(std::move(path)), m_before(std::move(before)), m_after(std::move(after)) {
        setText(QStringLiteral("Set %1 to %2").arg(m_path, m_after));
    }
    // Both values were valid in exactly the document state the stack restores, so these cannot fail.
    void redo() override { (void)m_model->setValue(m_path, m_after); }
    void undo() override { (void)m_model->setValue(m_path, m_before); }

private:
    RknotTreeModel* m_model;
    QString m_path, m_before, m_after;
};

}  // namespace

// ---- contents ---------------------------------------------------------------------------------------------------

RknotTreeModel::RknotTreeModel(QObject* parent) : QAbstractItemModel(parent) {}

void RknotTreeModel::setRknot(const Rknot& r, std::optional<Rknot> onDisk, const QString& label) {
    beginResetModel();
    m_rknot = r;
    m_disk = std::move(onDisk);
    m_diskJson = m_disk ? rknot_to_json(*m_disk) : std::string();
    m_label = label;
    m_nodes.clear();
    m_byPath.clear();
    m_top.clear();
    endResetModel();
    refresh();
    updateModified();
}

void RknotTreeModel::clear() {
    beginResetModel();
    m_rknot.reset();
    m_disk.reset();
    m_diskJson.clear();
    m_label.clear();
    m_nodes.clear();
    m_byPath.clear();
    m_top.clear();
    endResetModel();
    updateModified();
}

void RknotTreeModel::markSaved(const QString& label) {
    if (!m_rknot) return;
    m_disk = m_rknot;
    m_diskJson = rknot_to_json(*m_disk);
    m_label = label;
    updateModified();
}

bool RknotTreeModel::isModified() const {
    return m_modified;
}

void RknotTreeModel::updateModified() {
    const bool modified = m_rknot && (!m_disk || rknot_to_json(*m_rknot) != m_diskJson);
    if (modified == m_modified) return;
    m_modified = modified;
    emit modifiedChanged(modified);
}

std::vector<RknotTreeModel::Change> RknotTreeModel::diff() const {
    std::vector<Change> out;
    if (!m_rknot || !m_disk) return out;
    diffValues(documentOf(*m_disk), documentOf(*m_rknot), std::string(), out);
    return out;
}

void RknotTreeModel::refresh() {
    std::vector<Node> nodes;
    std::vector<int> top;
    if (m_rknot) {
        const json doc = documentOf(*m_rknot);
        // Appends the node for `v` (and its subtree) under `parent`; returns its index.
        std::function<int(const json&, const QString&, const QString&, int, int)> add =
            [&](const json& v, const QString& key, const QString& path, int parent, int row) -> int {
            const int at = static_cast<int>(nodes.size());
            nodes.emplace_back();
            {
                Node& n = nodes.back();
                n.parent = parent;
                n.row = row;
                n.key = key;
                n.path = path;
            }
            Kind kind = Kind::Null;
            QString literal, summary;
            std::vector<int> children;
            if (v.is_object()) {
                kind = Kind::Object;
                std::vector<std::string> keys;
                for (auto it = v.begin(); it != v.end(); ++it) keys.push_back(it.key());
                const auto rank = [&](const std::string& k) {
                    const int i = fieldIndex(path.isEmpty() ? text(k) : path + QLatin1Char('.') + text(k));
                    return i < 0 ? static_cast<int>(std::size(kFields)) : i;
                };
                std::stable_sort(keys.begin(), keys.end(),
                                 [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
                for (const std::string& k : keys) {
                    const QString child = path.isEmpty() ? text(k) : path + QLatin1Char('.') + text(k);
                    children.push_back(add(v[k], text(k), child, at, static_cast<int>(children.size())));
                }
                summary = v.size() == 1 ? tr("1 field") : tr("%1 fields").arg(v.size());
                // A matrix or a mask: say which one.
                if (v.contains("tensor") && v["tensor"].is_string()) {
                    summary = text(v["tensor"].get<std::string>());
                    if (v.contains("method") && v["method"].is_string())
                        summary += QStringLiteral(" — ") + text(v["method"].get<std::string>());
                    if (v.contains("rank") && v["rank"].is_number_integer() && v["rank"].get<int64_t>() > 0)
                        summary += tr(", rank %1").arg(v["rank"].get<int64_t>());
                    if (v.contains("bit_width") && v["bit_width"].is_number_integer())
                        summary += tr(", %1-bit factors").arg(v["bit_width"].get<int64_t>());
                } else if (v.contains("hot_count") && v.contains("neuron_count") && v.contains("layer_id")) {
                    summary = tr("layer %1: %2 of %3 neurons hot")
                                  .arg(text(dumpValue(v["layer_id"])), text(dumpValue(v["hot_count"])),
                                       text(dumpValue(v["neuron_count"])));
                }
            } else if (v.is_array()) {
                kind = Kind::Array;
                for (size_t i = 0; i < v.size(); ++i)
                    children.push_back(add(v[i], QStringLiteral("[%1]").arg(i), path + QStringLiteral("[%1]").arg(i),
                                           at, static_cast<int>(i)));
                const bool numbers = std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_number(); });
                if (numbers && !v.empty() && v.size() <= 16) {
                    QStringList parts;
                    for (const json& e : v) parts << text(dumpValue(e));
                    summary = QLatin1Char('[') + parts.join(QStringLiteral(", ")) + QLatin1Char(']');
                } else {
                    summary = v.size() == 1 ? tr("1 entry") : tr("%1 entries").arg(v.size());
                }
            } else {
                literal = text(dumpValue(v));
                if (v.is_string())
                    kind = Kind::String;
                else if (v.is_boolean())
                    kind = Kind::Bool;
                else if (v.is_number_integer())
                    kind = Kind::Integer;
                else if (v.is_number())
                    kind = Kind::Number;
            }
            Node& n = nodes[static_cast<size_t>(at)];
            n.kind = kind;
            n.literal = std::move(literal);
            n.summary = std::move(summary);
            n.children = std::move(children);
            return at;
        };
        std::vector<std::string> keys;
        for (auto it = doc.begin(); it != doc.end(); ++it) keys.push_back(it.key());
        std::stable_sort(keys.begin(), keys.end(), [](const std::string& a, const std::string& b) {
            const auto rank = [](const std::string& k) {
                const int i = fieldIndex(text(k));
                return i < 0 ? static_cast<int>(std::size(kFields)) : i;
            };
            return rank(a) < rank(b);
        });
        for (const std::string& k : keys)
            top.push_back(add(doc[k], text(k), text(k), -1, static_cast<int>(top.size())));
    }

    // Same shape (only leaf values changed): update in place so views keep their expansion and selection.
    bool sameShape = nodes.size() == m_nodes.size() && top == m_top;
    for (size_t i = 0; sameShape && i < nodes.size(); ++i) {
        const Node& a = nodes[i];
        const Node& b = m_nodes[i];
        const bool branchA = a.kind == Kind::Object || a.kind == Kind::Array;
        const bool branchB = b.kind == Kind::Object || b.kind == Kind::Array;
        sameShape = a.parent == b.parent && a.row == b.row && a.children == b.children && a.path == b.path &&
                    branchA == branchB;
    }
    if (!sameShape) {
        beginResetModel();
        m_nodes = std::move(nodes);
        m_top = std::move(top);
        m_byPath.clear();
        for (size_t i = 0; i < m_nodes.size(); ++i) m_byPath.insert(m_nodes[i].path, static_cast<int>(i));
        endResetModel();
        return;
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
        Node& old = m_nodes[i];
        const Node& now = nodes[i];
        if (old.kind == now.kind && old.literal == now.literal && old.summary == now.summary) continue;
        old.kind = now.kind;
        old.literal = now.literal;
        old.summary = now.summary;
        const quintptr id = static_cast<quintptr>(i);
        emit dataChanged(createIndex(old.row, Value, id), createIndex(old.row, Note, id));
    }
}

// ---- edits ------------------------------------------------------------------------------------------------------

bool RknotTreeModel::isEditablePath(const QString& path) const {
    const FieldInfo* f = fieldInfo(path);
    return f && f->editable;
}

QModelIndex RknotTreeModel::indexOfPath(const QString& path, int column) const {
    const int i = m_byPath.value(path, -1);
    if (i < 0) return {};
    return createIndex(m_nodes[static_cast<size_t>(i)].row, column, static_cast<quintptr>(i));
}

QString RknotTreeModel::literal(const QString& path) const {
    const QModelIndex at = indexOfPath(path);
    if (!at.isValid()) return {};
    return m_nodes[static_cast<size_t>(at.internalId())].literal;
}

Status RknotTreeModel::setValue(const QString& path, const QString& literal) {
    const QModelIndex at = indexOfPath(path);
    const std::string p = path.toStdString();
    const std::string label = m_label.isEmpty() ? std::string("(new rknot)") : m_label.toStdString();
    if (!m_rknot || !at.isValid()) return Status(StatusCode::InvalidArgument, label + ": " + p + ": no such field");
    const Node& n = m_nodes[static_cast<size_t>(at.internalId())];
    if (n.kind == Kind::Object || n.kind == Kind::Array)
        return Status(StatusCode::InvalidArgument, label + ": " + p + ": not a value (an object or array)");
    if (!isEditablePath(path)) {
        const FieldInfo* f = fieldInfo(path);
        return Status(StatusCode::InvalidArgument,
                      label + ": " + p + ": read-only" + (f && *f->note ? std::string(" (") + f->note + ")" : ""));
    }
    Rknot next = *m_rknot;
    if (Status s = rknot_set(next, {p + "=" + literal.toStdString()}, label); !s) return s;
    m_rknot = std::move(next);
    refresh();
    updateModified();
    emit edited(path);
    return Status::ok();
}

QString RknotTreeModel::textForEdit(const Node& n, const QVariant& value) const {
    switch (value.typeId()) {
        case QMetaType::Bool: return value.toBool() ? QStringLiteral("true") : QStringLiteral("false");
        case QMetaType::Int:
        case QMetaType::LongLong: return QString::number(value.toLongLong());
        case QMetaType::UInt:
        case QMetaType::ULongLong: return QString::number(value.toULongLong());
        case QMetaType::Double:
        case QMetaType::Float: return text(dumpValue(json(value.toDouble())));
        default: break;
    }
    const QString typed = value.toString();
    const FieldInfo* f = fieldInfo(n.path);
    // A string field takes the text as it is (shown without quotes); elsewhere the text is a JSON literal and an
    // empty one means null.
    if (f && QLatin1String(f->type) == QLatin1String("string")) return text(dumpValue(json(typed.toStdString())));
    const QString trimmed = typed.trimmed();
    return trimmed.isEmpty() ? QStringLiteral("null") : trimmed;
}

bool RknotTreeModel::setData(const QModelIndex& index, const QVariant& value, int role) {
    if (role != Qt::EditRole || !index.isValid() || !checkIndex(index) || index.column() != Value) return false;
    const Node& n = m_nodes[static_cast<size_t>(index.internalId())];
    if (n.kind == Kind::Object || n.kind == Kind::Array) return false;
    const QString path = n.path;
    const QString before = n.literal;
    const QString after = textForEdit(n, value);
    if (after == before) return true;
    const std::string label = m_label.isEmpty() ? std::string("(new rknot)") : m_label.toStdString();

    // Validate on a copy first, so a rejected value leaves no command on the stack.
    Status s = Status::ok();
    if (!isEditablePath(path)) {
        s = setValue(path, after);  // names the path and why it is read-only
    } else {
        Rknot trial = *m_rknot;
        s = rknot_set(trial, {path.toStdString() + "=" + after.toStdString()}, label);
    }
    if (!s) {
        const FieldInfo* f = fieldInfo(path);
        m_lastError = text(s.message());
        if (f && f->editable)
            m_lastError += tr(" (allowed: %1%2)")
                               .arg(QLatin1String(f->type),
                                    *f->allowed ? QStringLiteral(", ") + QLatin1String(f->allowed) : QString());
        emit editRejected(m_lastError);
        return false;
    }
    m_lastError.clear();
    if (m_undo)
        m_undo->push(new SetFieldCommand(this, path, before, after));  // push() runs redo(), which applies it
    else
        (void)setValue(path, after);  // validated just above
    return true;
}

// ---- QAbstractItemModel -----------------------------------------------------------------------------------------

QModelIndex RknotTreeModel::index(int row, int column, const QModelIndex& parent) const {
    if (!hasIndex(row, column, parent)) return {};
    if (!parent.isValid()) return createIndex(row, column, static_cast<quintptr>(m_top[static_cast<size_t>(row)]));
    const Node& p = m_nodes[static_cast<size_t>(parent.internalId())];
    return createIndex(row, column, static_cast<quintptr>(p.children[static_cast<size_t>(row)]));
}

QModelIndex RknotTreeModel::parent(const QModelIndex& child) const {
    if (!child.isValid()) return {};
    const Node& n = m_nodes[static_cast<size_t>(child.internalId())];
    if (n.parent < 0) return {};
    return createIndex(m_nodes[static_cast<size_t>(n.parent)].row, 0, static_cast<quintptr>(n.parent));
}

int RknotTreeModel::rowCount(const QModelIndex& parent) const {
    if (!parent.isValid()) return static_cast<int>(m_top.size());
    if (parent.column() != 0) return 0;
    return static_cast<int>(m_nodes[static_cast<size_t>(parent.internalId())].children.size());
}

int RknotTreeModel::columnCount(const QModelIndex&) const {
    return ColumnCount;
}

Qt::ItemFlags RknotTreeModel::flags(const QModelIndex& index) const {
    if (!index.isValid() || !checkIndex(index)) return Qt::NoItemFlags;
    Qt::ItemFlags f = Qt::ItemIsEnabled | Qt::ItemIsSelectable;
    const Node& n = m_nodes[static_cast<size_t>(index.internalId())];
    const bool leaf = n.kind != Kind::Object && n.kind != Kind::Array;
    if (!leaf) return f;
    f |= Qt::ItemNeverHasChildren;
    if (index.column() == Value && isEditablePath(n.path)) f |= Qt::ItemIsEditable;
    return f;
}

QVariant RknotTreeModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || !checkIndex(index)) return {};
    return nodeData(m_nodes[static_cast<size_t>(index.internalId())], index.column(), role);
}

QVariant RknotTreeModel::nodeData(const Node& n, int column, int role) const {
    const FieldInfo* f = fieldInfo(n.path);
    const bool leaf = n.kind != Kind::Object && n.kind != Kind::Array;
    if (role == PathRole) return n.path;
    if (role == LiteralRole) return leaf ? QVariant(n.literal) : QVariant();
    const auto note = [&]() -> QString {
        if (n.kind == Kind::Null && f && f->null_note) return tr("null: %1").arg(QLatin1String(f->null_note));
        QString s = f ? QString::fromLatin1(f->note) : QString();
        if (leaf && !isEditablePath(n.path)) s = s.isEmpty() ? tr("read-only") : tr("read-only; %1").arg(s);
        return s;
    };
    const auto value = [&]() -> QString {
        if (!leaf) return n.summary;
        if (n.kind == Kind::Null) return {};
        if (n.kind == Kind::String) {
            const json s = json::parse(n.literal.toStdString(), nullptr, false);
            return s.is_string() ? text(s.get<std::string>()) : n.literal;
        }
        return n.literal;
    };
    if (role == Qt::DisplayRole || role == Qt::EditRole) {
        switch (column) {
            case Key: return n.key;
            case Value: return value();
            case Type:
                if (f) return QString::fromLatin1(f->type);
                switch (n.kind) {
                    case Kind::Object: return tr("object");
                    case Kind::Array: return tr("array");
                    case Kind::String: return tr("string");
                    case Kind::Integer: return tr("integer");
                    case Kind::Number: return tr("number");
                    case Kind::Bool: return tr("boolean");
                    case Kind::Null: return tr("null");
                }
                return {};
            case Allowed: return f ? QString::fromLatin1(f->allowed) : QString();
            case Note: return note();
            default: return {};
        }
    }
    if (role == Qt::ToolTipRole) {
        const QString why = note();
        return why.isEmpty() ? n.path : n.path + QLatin1Char('\n') + why;
    }
    if (role == Qt::FontRole && column == Value && leaf && isEditablePath(n.path)) {
        QFont bold;
        bold.setBold(true);
        return bold;
    }
    return {};
}

QVariant RknotTreeModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
        case Key: return tr("Field");
        case Value: return tr("Value");
        case Type: return tr("Type");
        case Allowed: return tr("Allowed");
        case Note: return tr("Note");
        default: return {};
    }
}

}  // namespace gkq::ui
