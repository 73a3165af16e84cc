// The text form of schedule overrides, "KEY=INTEGER,...": one reader for the `--schedule` hint
// (ScheduleHint::parse, schedule.h) and the variable KDSL_SCAN_SCHEDULE (schedule_scan.cpp), so
// both accept and reject the same text with the same messages.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "schedule.h"

namespace kdsl {

/// A key of a schedule text and the integers it takes.
struct ScheduleKey {
  const char* name;
  const char* range;    ///< Its values, as messages name them: "0 or 1".
  bool (*allows)(int);  ///< Whether a value is one of them.
};

/// The items of a schedule text, in the order given: key, value.
using ScheduleItems = std::vector<std::pair<std::string, int>>;

/// Reads "KEY=INTEGER,..." where each KEY is one of `keys`, given once, with a value in its
/// range. Spaces and tabs around items, keys and values are ignored; a text of only those has no
/// items. `what` names the text in messages ("schedule hint", "KDSL_SCAN_SCHEDULE"), and
/// `key_list` is what the message of an unknown key lists. Throws ScheduleHintError for an empty
/// item (a comma at the end too, saying so), an item that is not KEY=INTEGER, a key given twice,
/// a value out of its key's range (naming the range) and an unknown key.
ScheduleItems parse_schedule_items(const std::string& text, const std::string& what,
                                   const std::vector<ScheduleKey>& keys,
                                   const std::string& key_list);

}  // namespace kdsl
