// A small C++17 translation unit using the standard library (benchmark workload).
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

struct Item { std::string name; int weight; std::optional<double> price; };
using Value = std::variant<int, double, std::string, std::vector<int>>;

template <typename T> std::string describe(const T& v) {
  std::ostringstream out; out << v; return out.str();
}
std::string describe(const Value& v) {
  return std::visit([](const auto& x) -> std::string {
    using X = std::decay_t<decltype(x)>;
    if constexpr (std::is_same_v<X, std::vector<int>>) return "vector of " + std::to_string(x.size());
    else return describe(x);
  }, v);
}
int main() {
  std::vector<Item> items{{"a", 3, 1.5}, {"b", 1, std::nullopt}, {"c", 2, 7.25}};
  std::sort(items.begin(), items.end(), [](const Item& l, const Item& r) { return l.weight < r.weight; });
  std::map<std::string, std::vector<Value>> table;
  std::unordered_map<int, std::function<int(int)>> ops{{1, [](int x) { return x + 1; }}, {2, [](int x) { return x * 2; }}};
  for (const Item& item : items) table[item.name].push_back(item.weight), table[item.name].push_back(item.name);
  int total = 0;
  for (const std::string& number : {"1", "22"}) total += ops[1](std::stoi(number));
  for (auto& [k, vs] : table) for (auto& v : vs) std::cout << k << " " << describe(v) << "\n";
  auto shared = std::make_shared<std::vector<Value>>(table["a"]);
  std::cout << total << " " << shared->size() << "\n";
}
