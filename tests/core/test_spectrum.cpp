// PLACEHOLDER: replaced by the real suite.
#include <QtTest>
class Placeholder : public QObject {
    Q_OBJECT
private slots:
    void notWritten() { QSKIP("not written yet"); }
};
QTEST_APPLESS_MAIN(Placeholder)
#include "test_spectrum.moc"
