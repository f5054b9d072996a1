// Contiguous, byte-balanced shares of the tensors; see cluster/share.hpp.
#include "fp8kit/cluster/share.hpp"

namespace fp8kit::cluster {

std::pair<std::size_t, std::size_t> share(const std::vector<std::uint64_t>& bytes, int rank, int size) {
    if (size <= 1) return {0, bytes.size()};
    long double total = 0;
    for (auto b : bytes) total += static_cast<long double>(b) + 1;  // +1: empty tensors still count
    // Item i belongs to the rank floor(middle_i * size / total); middles increase with i, so every
    // rank's items are contiguous and the ranks' ranges tile [0, n) in rank order.
    auto owner = [&](long double before, std::uint64_t b) {
        const long double mid = before + (static_cast<long double>(b) + 1) / 2;
        const long double r = mid * size / total;
        return r >= size ? size - 1 : static_cast<int>(r);
    };
    std::size_t first = bytes.size(), last = bytes.size();
    long double before = 0;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        const int o = owner(before, bytes[i]);
        if (o == rank && first == bytes.size()) first = i;
        if (o > rank) {
            last = i;
            break;
        }
        before += static_cast<long double>(bytes[i]) + 1;
    }
    if (first == bytes.size()) return {last, last};
    return {first, last};
}

}  // namespace fp8kit::cluster
