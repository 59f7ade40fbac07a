#pragma once
// "Connect to agent": an endpoint spec (with the recent ones offered) and, for agents that
// require CURVE, the server's public key file and this client's secret key file.
#include <QDialog>
#include <QString>
#include <QStringList>

class QComboBox;
class QLineEdit;
class QLabel;

namespace sp::ui {

struct ConnectionRequest {
    QString spec;           // "tcp://host:5556" or "TELEMETRY,CONTROL" (see parseEndpointSpec)
    QString serverKeyFile;  // empty: no CURVE
    QString clientKeyFile;  // this client's secret key (sp-ctl keygen)
};

class ConnectionDialog : public QDialog {
    Q_OBJECT
  public:
    ConnectionDialog(const QStringList& recentEndpoints, QWidget* parent = nullptr);
    ConnectionRequest request() const;

  private:
    void validate();

    QComboBox* endpoint_;
    QLineEdit* serverKey_;
    QLineEdit* clientKey_;
    QLabel* problem_;
};

}  // namespace sp::ui
