// The risky-pin question (issue 29, item 4), without widgets: an INT4 or FP8 pin quotes that
// format's SNR estimate against its threshold, not the INT8 calibration; an INT8 pin quotes the
// calibrated INT8 error when the run has one, and says so when it has neither.
#include <QtTest>

#include "sp/ui/pin_risk.h"

class TestPinRisk : public QObject {
    Q_OBJECT

  private slots:
    void int4_pin_quotes_the_int4_estimate() {
        sp::ui::PinRisk r;
        r.name = "blocks.3";
        r.sensitivity = 0.72;
        r.bytes_now = 2.0 * 1024 * 1024;
        r.bytes_pinned = 0.5 * 1024 * 1024;
        r.calibrated_error = 0.09;
        r.snr_db = 12.5;
        r.snr_threshold_db = 18.0;
        const std::string text = sp::ui::describeRisks({r}, sp::Precision::int4, 0.6);
        QVERIFY2(text.find("blocks.3: sensitivity 0.720; 2.0 MiB -> 512.0 KiB per step") != std::string::npos,
                 text.c_str());
        QVERIFY2(text.find("estimated int4 SNR 12.5 dB (below the threshold 18.0 dB)") != std::string::npos,
                 text.c_str());
        QVERIFY2(text.find("INT8") == std::string::npos, text.c_str());  // not the INT8 calibration
    }

    void int8_pin_quotes_the_calibration() {
        sp::ui::PinRisk r;
        r.name = "blocks.1";
        r.sensitivity = 0.9;
        r.calibrated_error = 0.0123;
        r.snr_db = 40.2;
        r.snr_threshold_db = 31.0;
        const std::string text = sp::ui::describeRisks({r}, sp::Precision::int8, 0.6);
        QVERIFY2(text.find("estimated int8 SNR 40.2 dB (threshold 31.0 dB); calibrated INT8 error 0.0123") !=
                     std::string::npos,
                 text.c_str());
        r.calibrated_error.reset();
        r.snr_db.reset();
        const std::string bare = sp::ui::describeRisks({r}, sp::Precision::int8, 0.6);
        QVERIFY2(bare.find("no calibrated INT8 error or SNR estimate in this run") != std::string::npos,
                 bare.c_str());
    }
};

QTEST_GUILESS_MAIN(TestPinRisk)
#include "test_pin_risk.moc"
