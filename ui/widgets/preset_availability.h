// Which codec presets the Compare view can run: the activation-aware ones (CodecParams::whiten: svd-llm, q4_0-lqer)
// need a Gram file from `gkq imatrix --gram`, which Compare cannot pass (the Quantize view can: its "Activation Gram
// matrices..." file), so they are listed but disabled with this reason instead of failing after the run starts.
#pragma once

#include "gkq/codec.h"

#include <QString>
#include <QStringLiteral>

#include <string>

namespace gkq::ui {

// Empty when Compare can run preset `name`; otherwise why not.
inline QString presetUnavailableReason(const std::string& name) {
    auto p = find_preset(name);
    if (!p) return QString::fromStdString(p.status().message());
    const bool whiten =
        std::any_of(p->by_role.begin(), p->by_role.end(), [](const CodecParams& c) { return c.whiten; });
    if (whiten)
        return QStringLiteral(
                   "needs the activations' Gram matrices (gkq imatrix --gram FILE, then gkq quantize "
                   "--preset %1 --gram FILE on the command line, or the Quantize view with its Activation Gram "
                   "matrices "
                   "file); Compare cannot pass a Gram file")
            .arg(QString::fromStdString(name));
    return {};
}

}  // namespace gkq::ui
