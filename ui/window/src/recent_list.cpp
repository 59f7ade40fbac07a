#include "sp/ui/recent_list.h"

#include <QSettings>
#include <utility>

namespace sp::ui {

RecentList::RecentList(QString settings_key, int capacity)
    : key_(std::move(settings_key)), capacity_(capacity) {}

QStringList RecentList::items() const {
    return QSettings().value(key_).toStringList();
}

void RecentList::add(const QString& item) {
    QStringList list = items();
    list.removeAll(item);
    list.prepend(item);
    while (list.size() > capacity_) list.removeLast();
    QSettings().setValue(key_, list);
}

void RecentList::remove(const QString& item) {
    QStringList list = items();
    list.removeAll(item);
    QSettings().setValue(key_, list);
}

void RecentList::clear() {
    QSettings().remove(key_);
}

}  // namespace sp::ui
