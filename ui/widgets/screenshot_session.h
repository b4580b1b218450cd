// renderScreenshots: drives a MainWindow through a short session and saves each main view as a PNG for the
// documentation — open the model and wait for its spectra, the Overview (with the model browser), the Spectrum
// view of one FFN up-projection with other layers overlaid and the rank at 90 % energy, then a quantization with
// `preset` (lowrank-q4 unless told) and its evaluation (KLD on the first 8 KB of heldout.txt beside the model, when
// present) in the Quantize view (quantize.png, and its layer x role heat map of methods, quantize-layers.png), then
// every preset in the Compare view on the same text, then the knot's rknot (Tuning
// view), then the knot's focus tensor reconstructed on every backend (Reconstruct view) and served on a free port with
// one greedy prompt and a few seconds of its metrics (Serve view). Everything shown is computed by the session itself.
// Works offscreen (QWidget::grab renders the charts there). Returns the files written, or an empty list with
// `error` set.
#pragma once

#include <QString>
#include <QStringList>

namespace gkq::ui {

class MainWindow;

QStringList renderScreenshots(MainWindow& window, const QString& modelPath, const QString& outDir, QString* error,
                              int timeoutMs = 600000, const QString& preset = QStringLiteral("lowrank-q4"));

}  // namespace gkq::ui
