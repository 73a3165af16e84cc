// The schedule hint's text form (`--schedule group=512,prefetch=1`): parsing, with the checks
// that need no kernel, and printing. The checks that need the kernel, the specialization and the
// target are in choose_row_schedule (schedule.cpp).
#include <fmt/format.h>

#include <set>
#include <string>
#include <utility>

#include "schedule.h"

namespace kdsl {

bool ScheduleHint::has_row_keys() const {
  return vec || group || cache_rows || cache_invariant || prefetch || pack || stream ||
         persistent || min_ctas || smem_columns || cluster || stage;
}

bool ScheduleHint::has_scan_keys() const {
  return t || lp || wp || vr;
}

bool ScheduleHint::empty() const {
  return !has_row_keys() && !has_scan_keys();
}

namespace {

// Each key's values, as the messages name them.
constexpr std::pair<const char*, const char*> kHintRanges[] = {
    {"vec", "1, 2, 4 or 8"},
    {"group", "a power of two up to 1024 (up to 1024 x cluster with a cluster)"},
    {"min_ctas", "1 to 32"},
    {"cluster", "1, 2, 4 or 8"},
    {"stage", "0 or 2 to 8"},
    {"cache_rows", "0 or 1"},
    {"cache_invariant", "0 or 1"},
    {"prefetch", "0 or 1"},
    {"pack", "0 or 1"},
    {"stream", "0 or 1"},
    {"persistent", "0 or 1"},
    {"smem_columns", "0 or 1"},
    {"t", "a power of two from 1 to 64"},
    {"lp", "a power of two from 1 to 32"},
    {"wp", "a power of two from 1 to 32"},
    {"vr", "a power of two from 1 to 16"}};

bool power_of_two(int v, int hi) {
  return v >= 1 && v <= hi && (v & (v - 1)) == 0;
}

// `s` without the spaces and tabs around it.
std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// Sets `key` to `v` in `h`; false when the key is unknown or `v` is outside its range.
bool set_hint(ScheduleHint& h, const std::string& key, int v) {
  if (key == "min_ctas" && v >= 1 && v <= 32) {
    h.min_ctas = v;
  } else if (key == "cluster" && (v == 1 || v == 2 || v == 4 || v == 8)) {
    h.cluster = v;
  } else if (key == "stage" && (v == 0 || (v >= 2 && v <= 8))) {
    h.stage = v;
  } else if (key == "t" && power_of_two(v, 64)) {
    h.t = v;
  } else if ((key == "lp" || key == "wp") && power_of_two(v, 32)) {
    (key == "lp" ? h.lp : h.wp) = v;
  } else if (key == "vr" && power_of_two(v, 16)) {
    h.vr = v;
  } else if (key == "vec" && (v == 1 || v == 2 || v == 4 || v == 8)) {
    h.vec = v;
  } else if (key == "group" && v >= 1 && v <= 8192 && (v & (v - 1)) == 0) {
    h.group = v;
  } else if ((key == "cache_rows" || key == "cache_invariant" || key == "prefetch" ||
              key == "pack" || key == "stream" || key == "persistent" || key == "smem_columns") &&
             (v == 0 || v == 1)) {
    std::optional<bool>& f = key == "cache_rows"        ? h.cache_rows
                             : key == "cache_invariant" ? h.cache_invariant
                             : key == "prefetch"        ? h.prefetch
                             : key == "pack"            ? h.pack
                             : key == "stream"          ? h.stream
                             : key == "persistent"      ? h.persistent
                                                        : h.smem_columns;
    f = v == 1;
  } else {
    return false;
  }
  return true;
}

}  // namespace

ScheduleHint ScheduleHint::parse(const std::string& text) {
  ScheduleHint h;
  if (trim(text).empty()) return h;
  std::set<std::string> seen;
  size_t pos = 0;
  for (int index = 1; pos <= text.size(); ++index) {
    size_t comma = text.find(',', pos);
    std::string item =
        trim(text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    pos = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) {
      throw ScheduleHintError(fmt::format(
          "schedule hint '{}': item {} is empty{}; give KEY=INTEGER items separated by commas",
          text, index, comma == std::string::npos ? " (a comma at the end)" : ""));
    }
    size_t eq = item.find('=');
    std::string key = trim(item.substr(0, eq));
    std::string value = eq == std::string::npos ? "" : trim(item.substr(eq + 1));
    if (!seen.insert(key).second) {
      throw ScheduleHintError(fmt::format("schedule hint '{}': {} is given twice", text, key));
    }
    const size_t sign = !value.empty() && (value[0] == '-' || value[0] == '+') ? 1 : 0;
    if (value.size() == sign || value.find_first_not_of("0123456789", sign) != std::string::npos) {
      throw ScheduleHintError(fmt::format("schedule hint '{}': expected KEY=INTEGER", item));
    }
    // A whole number beyond an int is outside every key's range: v = -1 is too.
    int v = -1;
    bool huge = false;
    try {
      v = std::stoi(value);
    } catch (const std::out_of_range&) {
      huge = true;
    }
    if (set_hint(h, key, v)) continue;
    // A known key with a value out of its range names that range; otherwise every key.
    for (const auto& [k, range] : kHintRanges) {
      if (key != k) continue;
      if (huge) {
        throw ScheduleHintError(fmt::format("schedule hint '{}': {} is out of range ({} is {})",
                                            item, value, key, range));
      }
      throw ScheduleHintError(fmt::format("schedule hint '{}': {} is {}", item, key, range));
    }
    throw ScheduleHintError(
        fmt::format("schedule hint '{}': keys are vec (1, 2, 4, 8), group (a power "
                    "of two up to 1024 x cluster), cache_rows, cache_invariant, prefetch, "
                    "pack, stream, persistent, smem_columns (0 or 1), min_ctas (1 to 32), "
                    "cluster (1, 2, 4, 8), stage (0, 2 to 8); for scan kernels t (1 to 64), "
                    "lp, wp (1 to 32), vr (1 to 16), powers of two",
                    item));
  }
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
  if (t) add("t", *t);
  if (lp) add("lp", *lp);
  if (wp) add("wp", *wp);
  if (vr) add("vr", *vr);
  return s;
}

}  // namespace kdsl
