#pragma once
// A most-recent-first list of strings kept in QSettings (recent files, recent endpoints).
#include <QString>
#include <QStringList>

namespace sp::ui {

class RecentList {
  public:
    explicit RecentList(QString settings_key, int capacity = 10);

    QStringList items() const;
    // Moves (or adds) `item` to the front and saves.
    void add(const QString& item);
    void remove(const QString& item);
    void clear();

  private:
    QString key_;
    int capacity_;
};

}  // namespace sp::ui
