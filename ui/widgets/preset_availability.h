// Which codec presets the workbench can run: the activation-aware ones (CodecParams::whiten: svd-llm, q4_0-lqer)
// need a Gram file from `gkq imatrix --gram`, which the workbench cannot pass yet, so they are listed but disabled
// with this reason instead of failing after the run starts.
#pragma once

#include "gkq/codec.h"

#include <QString>
#include <QStringLiteral>

#include <string>

namespace gkq::ui {

// Empty when the workbench can run preset `name`; otherwise why not.
inline QString presetUnavailableReason(const std::string& name) {
    auto p = find_preset(name);
    if (!p) return QString::fromStdString(p.status().message());
    const bool whiten =
        std::any_of(p->by_role.begin(), p->by_role.end(), [](const CodecParams& c) { return c.whiten; });
    if (whiten)
        return QStringLiteral(
                   "needs the activations' Gram matrices (gkq imatrix --gram FILE, then gkq quantize "
                   "--preset %1 --gram FILE on the command line); the workbench cannot pass a Gram file yet")
            .arg(QString::fromStdString(name));
    return {};
}

}  // namespace gkq::ui
