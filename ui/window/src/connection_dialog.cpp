#include "sp/ui/connection_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include "sp/protocol.h"
#include "sp/ui/job_spec.h"
#include "sp/ui/live_source.h"

namespace sp::ui {

namespace {

QWidget* withBrowse(QLineEdit* edit, const QString& caption, QWidget* parent) {
    auto* box = new QWidget(parent);
    auto* row = new QHBoxLayout(box);
    row->setContentsMargins(0, 0, 0, 0);
    auto* browse = new QPushButton(QObject::tr("Browse…"), box);
    row->addWidget(edit, 1);
    row->addWidget(browse);
    QObject::connect(browse, &QPushButton::clicked, edit, [edit, caption, parent] {
        const QString file = QFileDialog::getOpenFileName(parent, caption, edit->text());
        if (!file.isEmpty()) edit->setText(file);
    });
    return box;
}

}  // namespace

ConnectionDialog::ConnectionDialog(const QStringList& recent_endpoints, QWidget* parent)
    : QDialog(parent),
      endpoint_(new QComboBox(this)),
      ranks_(new QSpinBox(this)),
      server_key_(new QLineEdit(this)),
      client_key_(new QLineEdit(this)),
      problem_(new QLabel(this)) {
    setWindowTitle(tr("Connect to agent"));
    endpoint_->setEditable(true);
    endpoint_->addItems(recent_endpoints);
    if (recent_endpoints.isEmpty())
        endpoint_->addItem(QString::fromLatin1(sp::protocol::kDefaultTelemetryEndpoint));
    endpoint_->setMinimumWidth(420);
    endpoint_->setToolTip(
        tr("The agent's telemetry endpoint (control = port + 1), or TELEMETRY,CONTROL.\n"
           "Examples: tcp://127.0.0.1:5556   ipc:///tmp/sp.tel,ipc:///tmp/sp.ctl\n"
           "A data-parallel job: each rank's endpoints separated by ';' (rank 0 first), or Ranks."));
    ranks_->setRange(1, 4096);
    ranks_->setToolTip(
        tr("A data-parallel job of this many ranks: rank r listens on the endpoint's ports + 2·r.\n"
           "1: one agent, or the ranks the endpoint lists separated by ';'."));
    server_key_->setPlaceholderText(tr("only for agents that require CURVE"));
    client_key_->setPlaceholderText(tr("secret key file from sp-ctl keygen"));
    problem_->setStyleSheet(QStringLiteral("color: #e05050"));
    problem_->setWordWrap(true);

    auto* form = new QFormLayout;
    form->addRow(tr("&Endpoint:"), endpoint_);
    form->addRow(tr("&Ranks:"), ranks_);
    form->addRow(tr("&Server public key:"), withBrowse(server_key_, tr("Server public key"), this));
    form->addRow(tr("&Client secret key:"), withBrowse(client_key_, tr("Client secret key"), this));
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Connect"));
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(problem_);
    layout->addWidget(buttons);

    connect(buttons, &QDialogButtonBox::accepted, this, [this] {
        validate();
        if (problem_->text().isEmpty()) accept();
    });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(endpoint_, &QComboBox::editTextChanged, this, [this] { problem_->clear(); });
    connect(ranks_, &QSpinBox::valueChanged, this, [this] { problem_->clear(); });
}

ConnectionRequest ConnectionDialog::request() const {
    return {endpoint_->currentText().trimmed(), server_key_->text().trimmed(), client_key_->text().trimmed(),
            ranks_->value() > 1 ? ranks_->value() : 0};
}

void ConnectionDialog::validate() {
    QString error;
    const ConnectionRequest r = request();
    if (!parseJobSpec(r.spec, r.ranks, &error)) {
        problem_->setText(error);
    } else if (r.server_key_file.isEmpty() != r.client_key_file.isEmpty()) {
        problem_->setText(tr("CURVE needs both the server's public key and this client's secret key."));
    } else {
        problem_->clear();
    }
}

}  // namespace sp::ui
