// The schedule hint's text form (`--schedule group=512,prefetch=1`): parsing, with the checks
// that need no kernel, and printing; the reader of "KEY=INTEGER,..." texts, which
// KDSL_SCAN_SCHEDULE shares (schedule_hint.h). The checks that need the kernel, the specialization
// and the target are in choose_row_schedule (schedule.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "schedule_hint.h"
#include "text_util.h"

namespace kdsl {

bool ScheduleHint::has_row_keys() const {
  return vec || group || cache_rows || cache_invariant || prefetch || pack || stream ||
         persistent || min_ctas || smem_columns || cluster || stage || butterfly || unroll ||
         online || push || reread;
}

bool ScheduleHint::has_scan_keys() const {
  return t || lp || wp || vr;
}

bool ScheduleHint::empty() const {
  return !has_row_keys() && !has_scan_keys();
}

namespace {

bool power_of_two(int v, int hi) {
  return v >= 1 && v <= hi && (v & (v - 1)) == 0;
}

bool zero_or_one(int v) {
  return v == 0 || v == 1;
}

bool one_to_eight(int v) {
  return v == 1 || v == 2 || v == 4 || v == 8;
}

// The hint's keys, with their values as the messages name them.
const std::vector<ScheduleKey>& hint_keys() {
  static const std::vector<ScheduleKey> keys = {
      {"vec", "1, 2, 4 or 8", one_to_eight},
      {"group", "a power of two up to 1024 (up to 1024 x cluster with a cluster)",
       [](int v) { return power_of_two(v, 8192); }},
      {"min_ctas", "1 to 32", [](int v) { return v >= 1 && v <= 32; }},
      {"cluster", "1, 2, 4 or 8", one_to_eight},
      {"stage", "0 or 2 to 8", [](int v) { return v == 0 || (v >= 2 && v <= 8); }},
      {"cache_rows", "0 or 1", zero_or_one},
      {"cache_invariant", "0 or 1", zero_or_one},
      {"prefetch", "0 or 1", zero_or_one},
      {"pack", "0 or 1", zero_or_one},
      {"stream", "0 or 1", zero_or_one},
      {"persistent", "0 or 1", zero_or_one},
      {"smem_columns", "0 or 1", zero_or_one},
      {"butterfly", "0 or 1", zero_or_one},
      {"online", "0 or 1", zero_or_one},
      {"push", "0 to 3", [](int v) { return v >= 0 && v <= 3; }},
      {"reread", "0 or 1", zero_or_one},
      {"unroll", "0 (every chunk) or a power of two up to 64",
       [](int v) { return v == 0 || power_of_two(v, 64); }},
      {"t", "a power of two from 1 to 64", [](int v) { return power_of_two(v, 64); }},
      {"lp", "a power of two from 1 to 32", [](int v) { return power_of_two(v, 32); }},
      {"wp", "a power of two from 1 to 32", [](int v) { return power_of_two(v, 32); }},
      {"vr", "a power of two from 1 to 16", [](int v) { return power_of_two(v, 16); }}};
  return keys;
}

// Sets `key` (checked by parse_schedule_items) to `v` in `h`.
void set_hint(ScheduleHint& h, const std::string& key, int v) {
  std::optional<int>* number = key == "vec"        ? &h.vec
                               : key == "group"    ? &h.group
                               : key == "min_ctas" ? &h.min_ctas
                               : key == "cluster"  ? &h.cluster
                               : key == "stage"    ? &h.stage
                               : key == "unroll"   ? &h.unroll
                               : key == "push"     ? &h.push
                               : key == "t"        ? &h.t
                               : key == "lp"       ? &h.lp
                               : key == "wp"       ? &h.wp
                               : key == "vr"       ? &h.vr
                                                   : nullptr;
  if (number) {
    *number = v;
    return;
  }
  std::optional<bool>& f = key == "cache_rows"        ? h.cache_rows
                           : key == "cache_invariant" ? h.cache_invariant
                           : key == "prefetch"        ? h.prefetch
                           : key == "pack"            ? h.pack
                           : key == "stream"          ? h.stream
                           : key == "persistent"      ? h.persistent
                           : key == "butterfly"       ? h.butterfly
                           : key == "online"          ? h.online
                           : key == "reread"          ? h.reread
                                                      : h.smem_columns;
  f = v == 1;
}

}  // namespace

ScheduleItems parse_schedule_items(const std::string& text, const std::string& what,
                                   const std::vector<ScheduleKey>& keys,
                                   const std::string& key_list) {
  ScheduleItems items;
  if (trim_blanks(text).empty()) return items;
  std::set<std::string> seen;
  size_t pos = 0;
  for (int index = 1; pos <= text.size(); ++index) {
    size_t comma = text.find(',', pos);
    std::string item =
        trim_blanks(text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    pos = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) {
      throw ScheduleHintError(fmt::format(
          "{} '{}': item {} is empty{}; give KEY=INTEGER items separated by commas", what, text,
          index, comma == std::string::npos ? " (a comma at the end)" : ""));
    }
    size_t eq = item.find('=');
    std::string key = trim_blanks(item.substr(0, eq));
    std::string value = eq == std::string::npos ? "" : trim_blanks(item.substr(eq + 1));
    if (!seen.insert(key).second) {
      throw ScheduleHintError(fmt::format("{} '{}': {} is given twice", what, text, key));
    }
    const size_t sign = !value.empty() && (value[0] == '-' || value[0] == '+') ? 1 : 0;
    if (value.size() == sign || value.find_first_not_of("0123456789", sign) != std::string::npos) {
      throw ScheduleHintError(fmt::format("{} '{}': expected KEY=INTEGER", what, item));
    }
    const auto known =
        std::find_if(keys.begin(), keys.end(), [&](const ScheduleKey& k) { return key == k.name; });
    if (known == keys.end()) {
      throw ScheduleHintError(fmt::format("{} '{}': keys are {}", what, item, key_list));
    }
    int v = 0;
    try {
      v = std::stoi(value);
    } catch (const std::out_of_range&) {  // a whole number beyond an int: outside every range
      throw ScheduleHintError(fmt::format("{} '{}': {} is out of range ({} is {})", what, item,
                                          value, key, known->range));
    }
    if (!known->allows(v)) {
      throw ScheduleHintError(fmt::format("{} '{}': {} is {}", what, item, key, known->range));
    }
    items.emplace_back(key, v);
  }
  return items;
}

ScheduleHint ScheduleHint::parse(const std::string& text) {
  ScheduleHint h;
  const ScheduleItems items = parse_schedule_items(
      text, "schedule hint", hint_keys(),
      "vec (1, 2, 4, 8), group (a power of two up to 1024 x cluster), cache_rows, "
      "cache_invariant, prefetch, pack, stream, persistent, smem_columns, butterfly, online, "
      "reread (0 "
      "or 1), "
      "min_ctas (1 to 32), cluster (1, 2, 4, 8), stage (0, 2 to 8), unroll (0, 1, 2, 4, ..., 64), "
      "push (0 to 3); "
      "for scan kernels t (1 to "
      "64), lp, wp (1 to 32), vr (1 to 16), powers of two");
  for (const auto& [key, v] : items) set_hint(h, key, v);
  if (h.stage && *h.stage >= 2 && h.prefetch && *h.prefetch) {
    throw ScheduleHintError(fmt::format(
        "schedule hint '{}': stage and prefetch=1 both fetch the next row ahead; give one", text));
  }
  return h;
}

std::string ScheduleHint::str() const {
  std::string s;
  auto add = [&](const char* k, int v) { s += fmt::format("{}{}={}", s.empty() ? "" : ",", k, v); };
  if (vec) add("vec", *vec);
  if (group) add("group", *group);
  if (cache_rows) add("cache_rows", *cache_rows);
  if (cache_invariant) add("cache_invariant", *cache_invariant);
  if (prefetch) add("prefetch", *prefetch);
  if (pack) add("pack", *pack);
  if (stream) add("stream", *stream);
  if (persistent) add("persistent", *persistent);
  if (min_ctas) add("min_ctas", *min_ctas);
  if (smem_columns) add("smem_columns", *smem_columns);
  if (cluster) add("cluster", *cluster);
  if (stage) add("stage", *stage);
  if (butterfly) add("butterfly", *butterfly);
  if (unroll) add("unroll", *unroll);
  if (online) add("online", *online);
  if (push) add("push", *push);
  if (reread) add("reread", *reread);
  if (t) add("t", *t);
  if (lp) add("lp", *lp);
  if (wp) add("wp", *wp);
  if (vr) add("vr", *vr);
  return s;
}

}  // namespace kdsl
