#include "sp/ui/block_table_model.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "sp/ui/decision_history.h"
#include "sp/ui/run_session.h"

namespace sp::ui {
namespace {

bool sameFloat(float a, float b) {
    std::uint32_t x = 0, y = 0;
    std::memcpy(&x, &a, sizeof x);
    std::memcpy(&y, &b, sizeof y);
    return x == y || (std::isnan(a) && std::isnan(b));
}

QString precisionText(Precision p) {
    return QString::fromLatin1(to_string(p).data(), int(to_string(p).size()));
}

bool isNumeric(int column) {
    return column != BlockTableModel::NameColumn && column != BlockTableModel::PrecisionColumn &&
           column != BlockTableModel::ForcedColumn && column != BlockTableModel::WhyColumn;
}

}  // namespace

BlockTableModel::BlockTableModel(RunSession* session, QObject* parent)
    : QAbstractTableModel(parent), session_(session) {
    if (!session) return;
    refresh_timer_.setSingleShot(true);
    connect(&refresh_timer_, &QTimer::timeout, this, &BlockTableModel::refresh);
    connect(session, &RunSession::reset, this, &BlockTableModel::rebuild);
    connect(session, &RunSession::updatesAppended, this, &BlockTableModel::onUpdatesAppended);
    // The end of a load (or a state change) shows the last data at once.
    connect(session, &RunSession::stateChanged, this, [this] {
        if (refresh_timer_.isActive()) refresh();
    });
    // A command sent, applied or rejected: the Forced column's "pending" follows at once.
    connect(session, &RunSession::commandStateChanged, this, &BlockTableModel::refresh);
    rebuild();
}

int BlockTableModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int BlockTableModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

std::size_t BlockTableModel::shownUpdate() const {
    if (!session_ || session_->store().empty()) return kFollowLatest;
    const std::size_t last = session_->store().updateCount() - 1;
    return update_ == kFollowLatest ? last : std::min(update_, last);
}

void BlockTableModel::onUpdatesAppended() {
    // A view showing a fixed update does not change when data arrives.
    if (!followsLatest() || refresh_timer_.isActive()) return;
    const qint64 since = last_refresh_.isValid() ? last_refresh_.elapsed() : min_refresh_ms_;
    if (since >= min_refresh_ms_) {
        refresh();
    } else {
        refresh_timer_.start(int(min_refresh_ms_ - since));
    }
}

void BlockTableModel::setUpdate(std::size_t update) {
    update_ = update;
    refresh();
}

BlockTableModel::RowState BlockTableModel::readRow(int block, std::size_t update) const {
    RowState r;
    const TelemetryStore& store = session_->store();
    r.name = store.layout()[static_cast<std::size_t>(block)].name;
    if (update == kFollowLatest) return r;
    r.cell = store.cell(block, update);
    r.values[0] = store.value(block, update, BlockField::sensitivity);
    r.values[1] = store.value(block, update, BlockField::grad_score);
    r.values[2] = store.value(block, update, BlockField::error_score);
    r.values[3] = store.value(block, update, BlockField::relative_magnitude);
    r.last_change = store.lastChangeStep(block, update);
    r.switches = store.switchesUpTo(block, update);
    if (r.cell.present && r.cell.forced == ForcedBy::pin) r.pin = r.cell.precision;
    r.pending = session_->pendingFor(block);
    if (r.pin) r.pin_terms = session_->pinTermsFor(block);
    r.why = store.reasonText(block, update);
    // The sentence is kept for the latest update only; at an earlier one (a replay moved back) the
    // cell's reason says which rule decided, and the hold history and cooldown say the rest.
    if (r.why.empty() && r.cell.present && update + 1 < store.updateCount())
        r.why = "reason: " + std::string(sp::to_string(r.cell.reason));
    r.history = holdHistory(store, block, update);
    r.may_switch_at = maySwitchAt(store, block, update, session_->runConfig().min_steps_between_switches);
    r.snr = store.snr(block, update);
    return r;
}

std::string BlockTableModel::RowState::whyText() const {
    std::string text = why;
    const auto add = [&text](const std::string& part) { text += (text.empty() ? "" : "; ") + part; };
    if (!history.empty()) add(history);
    if (may_switch_at) add("may switch again at step " + std::to_string(*may_switch_at));
    return text;
}

void BlockTableModel::rebuild() {
    beginResetModel();
    rows_.clear();
    if (session_) {
        const std::size_t update = shownUpdate();
        const int n = session_->store().blockCount();
        rows_.reserve(static_cast<std::size_t>(n));
        for (int b = 0; b < n; ++b) rows_.push_back(readRow(b, update));
    }
    endResetModel();
}

void BlockTableModel::refresh() {
    refresh_timer_.stop();
    last_refresh_.restart();
    if (!session_) return;
    const int n = session_->store().blockCount();
    const int old = static_cast<int>(rows_.size());
    if (n < old) {  // only a new layout shrinks: start over
        rebuild();
        return;
    }
    const std::size_t update = shownUpdate();
    for (int b = 0; b < old; ++b) {
        RowState next = readRow(b, update);
        const RowState& prev = rows_[static_cast<std::size_t>(b)];
        bool changed[ColumnCount] = {};
        changed[NameColumn] = next.name != prev.name;
        changed[PrecisionColumn] =
            next.cell.present != prev.cell.present || next.cell.precision != prev.cell.precision;
        for (int i = 0; i < 4; ++i)
            changed[SensitivityColumn + i] = !sameFloat(next.values[i], prev.values[i]);
        changed[ForcedColumn] = next.cell.present != prev.cell.present ||
                                next.cell.forced != prev.cell.forced || next.pin != prev.pin ||
                                next.pending != prev.pending || next.pin_terms != prev.pin_terms;
        changed[LastChangeColumn] = next.last_change != prev.last_change;
        changed[SwitchesColumn] = next.switches != prev.switches;
        changed[WhyColumn] =
            next.why != prev.why || next.history != prev.history || next.may_switch_at != prev.may_switch_at;
        // The tooltip shows the reason: a reason change repaints the precision cell.
        changed[PrecisionColumn] = changed[PrecisionColumn] || next.cell.reason != prev.cell.reason;
        rows_[static_cast<std::size_t>(b)] = std::move(next);
        // One dataChanged per run of adjacent changed cells.
        for (int c = 0; c < ColumnCount;) {
            if (!changed[c]) {
                ++c;
                continue;
            }
            int end = c;
            while (end + 1 < ColumnCount && changed[end + 1]) ++end;
            emit dataChanged(index(b, c), index(b, end));
            c = end + 1;
        }
    }
    if (n > old) {
        beginInsertRows(QModelIndex(), old, n - 1);
        for (int b = old; b < n; ++b) rows_.push_back(readRow(b, update));
        endInsertRows();
    }
}

QVariant BlockTableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
    const int block = index.row();
    const RowState& r = rows_[static_cast<std::size_t>(block)];
    const int column = index.column();
    const bool present = r.cell.present;
    switch (role) {
        case Qt::DisplayRole:
            switch (column) {
                case IdColumn:
                    return block;
                case NameColumn:
                    return QString::fromStdString(r.name);
                case PrecisionColumn:
                    return present ? precisionText(r.cell.precision) : QString();
                case SensitivityColumn:
                case GradScoreColumn:
                case ErrorScoreColumn:
                case RelativeMagnitudeColumn: {
                    const float v = r.values[column - SensitivityColumn];
                    return std::isfinite(v) ? QString::number(double(v), 'f', 3) : QString();
                }
                case ForcedColumn: {
                    QString forced =
                        r.pin ? QStringLiteral("pin: ") + precisionText(*r.pin) +
                                    (r.pin_terms.isEmpty() ? QString()
                                                           : QStringLiteral(" (%1)").arg(r.pin_terms))
                        : present && r.cell.forced == ForcedBy::config ? QStringLiteral("config")
                                                                       : QString();
                    if (r.pending.isEmpty()) return forced;
                    return (forced.isEmpty() ? forced : forced + QStringLiteral(" · ")) +
                           QStringLiteral("pending: ") + r.pending;
                }
                case LastChangeColumn:
                    return r.last_change >= 0 ? QVariant(static_cast<qlonglong>(r.last_change))
                                              : QVariant(QString());
                case SwitchesColumn:
                    return r.switches;
                case WhyColumn:
                    return QString::fromStdString(r.whyText());
                default:
                    return {};
            }
        case SortRole:
            switch (column) {
                case IdColumn:
                    return block;
                case NameColumn:
                    return QString::fromStdString(r.name);
                case PrecisionColumn:
                    return present ? QVariant(static_cast<int>(r.cell.precision)) : QVariant();
                case SensitivityColumn:
                case GradScoreColumn:
                case ErrorScoreColumn:
                case RelativeMagnitudeColumn: {
                    const float v = r.values[column - SensitivityColumn];
                    return std::isnan(v) ? QVariant() : QVariant(double(v));
                }
                case ForcedColumn:
                    return present ? QVariant(static_cast<int>(r.cell.forced)) : QVariant();
                case LastChangeColumn:
                    return static_cast<qlonglong>(r.last_change);
                case SwitchesColumn:
                    return r.switches;
                case WhyColumn:
                    return QString::fromStdString(r.why);
                default:
                    return {};
            }
        case Qt::TextAlignmentRole:
            return isNumeric(column) ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter))
                                     : QVariant(int(Qt::AlignLeft | Qt::AlignVCenter));
        case Qt::ToolTipRole: {
            QString tip = QStringLiteral("%1 (id %2)").arg(QString::fromStdString(r.name)).arg(block);
            if (!present) return tip + QStringLiteral("\nno detail at this update");
            tip += QStringLiteral("\n%1, reason: %2")
                       .arg(precisionText(r.cell.precision),
                            QString::fromLatin1(to_string(r.cell.reason).data(),
                                                int(to_string(r.cell.reason).size())));
            if (r.pin) tip += QStringLiteral("\npinned to %1 by an operator").arg(precisionText(*r.pin));
            if (!r.pin_terms.isEmpty()) tip += QStringLiteral(", ") + r.pin_terms;
            if (!r.pending.isEmpty())
                tip += QStringLiteral("\npending (sent, not yet applied): ") + r.pending;
            if (r.cell.forced == ForcedBy::config) tip += QStringLiteral("\nforced by the config");
            if (r.cell.changed) tip += QStringLiteral("\nchanged at this update");
            if (const std::string why = r.whyText(); !why.empty())
                tip += QStringLiteral("\nwhy: ") + QString::fromStdString(why);
            QString snr;
            for (Precision p : kLowFormatsCheapestFirst)
                if (std::isfinite(r.snr[std::size_t(p)]))
                    snr += QStringLiteral("%1%2 %3 dB")
                               .arg(snr.isEmpty() ? QString() : QStringLiteral(", "), precisionText(p))
                               .arg(r.snr[std::size_t(p)], 0, 'f', 1);
            if (!snr.isEmpty()) tip += QStringLiteral("\nestimated SNR: ") + snr;
            return tip;
        }
        default:
            return {};
    }
}

// What each column measures (core/POLICY.md rule 4 for the scores), for the header's tooltip.
QString BlockTableModel::headerToolTip(int section) {
    switch (section) {
        case PrecisionColumn:
            return tr("The format the block runs in at this update.");
        case SensitivityColumn:
            return tr(
                "How much the block needs precision, 0 to 1: grad_weight × grad score + error_weight × "
                "error score. At or above bf16_threshold it stays BF16; below int8_threshold it may go "
                "lower (with the hysteresis margin once it is there).");
        case GradScoreColumn:
            return tr(
                "The block's gradient L2 norm relative to the mean over blocks (the relative "
                "magnitude), divided by grad_sensitivity_threshold and capped at 1.");
        case ErrorScoreColumn:
            return tr(
                "The block's calibrated quantization error (the relative change of its output, "
                "|out_bf16 − out_int8| / |out_bf16|, on calibration batches) divided by "
                "quant_error_threshold, capped at 1; 0 without calibration.");
        case RelativeMagnitudeColumn:
            return tr("The block's windowed gradient L2 norm divided by the mean over all blocks.");
        case ForcedColumn:
            return tr("Who decided instead of the policy: an operator's pin, or the config's force lists.");
        case LastChangeColumn:
            return tr("The step of the block's last precision change.");
        case SwitchesColumn:
            return tr("Precision changes of the block so far.");
        case WhyColumn:
            return tr(
                "The policy's reason in words, what keeps a held block where it is, and when the "
                "cooldown lets it switch again.");
        default:
            return {};
    }
}

QVariant BlockTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation == Qt::Horizontal && role == Qt::ToolTipRole) return headerToolTip(section);
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
        case IdColumn:
            return tr("Id");
        case NameColumn:
            return tr("Name");
        case PrecisionColumn:
            return tr("Precision");
        case SensitivityColumn:
            return tr("Sensitivity");
        case GradScoreColumn:
            return tr("Grad score");
        case ErrorScoreColumn:
            return tr("Error score");
        case RelativeMagnitudeColumn:
            return tr("Rel. magnitude");
        case ForcedColumn:
            return tr("Forced");
        case LastChangeColumn:
            return tr("Last change");
        case SwitchesColumn:
            return tr("Switches");
        case WhyColumn:
            return tr("Why");
        default:
            return {};
    }
}

}  // namespace sp::ui
