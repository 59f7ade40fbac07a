#pragma once
// "Connect to agent": an endpoint spec (with the recent ones offered) and, for agents that
// require CURVE, the server's public key file and this client's secret key file.
#include <QDialog>
#include <QString>
#include <QStringList>

class QComboBox;
class QLineEdit;
class QSpinBox;
class QLabel;

namespace sp::ui {

struct ConnectionRequest {
    QString spec;             // "tcp://host:5556" or "TELEMETRY,CONTROL" (see parseEndpointSpec)
    QString server_key_file;  // empty: no CURVE
    QString client_key_file;  // this client's secret key (sp-ctl keygen)
    // A data-parallel job's ranks (parseJobSpec): 0 as `spec` lists them (one agent, or one per ';'),
    // N: the N ranks from `spec`'s ports (--ranks N).
    int ranks = 0;
};

class ConnectionDialog : public QDialog {
    Q_OBJECT
  public:
    ConnectionDialog(const QStringList& recent_endpoints, QWidget* parent = nullptr);
    ConnectionRequest request() const;

  private:
    void validate();

    QComboBox* endpoint_;
    QSpinBox* ranks_;
    QLineEdit* server_key_;
    QLineEdit* client_key_;
    QLabel* problem_;
};

}  // namespace sp::ui
