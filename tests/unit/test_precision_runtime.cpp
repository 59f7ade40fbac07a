// placeholder, replaced by the real suite
#include <QtTest>
class Placeholder : public QObject { Q_OBJECT };
QTEST_APPLESS_MAIN(Placeholder)
#include "test_precision_runtime.moc"
