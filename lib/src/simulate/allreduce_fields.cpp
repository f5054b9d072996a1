// The field tables of the FP8 all-reduce's result: every key its rows (`fp8kit simulate msamp`)
// and fp8kit.msamp.allreduce's dict carry, written once (docs/msamp.md defines each metric).
#include "fp8kit/simulate.hpp"

namespace fp8kit::simulate {

using io::FieldValue;

double cast_underflow_share(const AllReduceResult& r) {
    return r.cast_nonzero ? double(r.cast_underflow) / double(r.cast_nonzero) : 0.0;
}
double underflow_share(const AllReduceResult& r, const OrderResult& o) {
    return r.size ? double(o.underflow) / double(r.size) : 0.0;
}
double stalled_share(const OrderResult& o) { return o.hops ? double(o.stalled_hops) / double(o.hops) : 0.0; }

const io::FieldTable<AllReduceResult>& allreduce_fields() {
    using R = const AllReduceResult&;
    static const io::FieldTable<AllReduceResult> t = {
        {"old_scale", [](R r) -> FieldValue { return double(r.old_scale); }},
        {"amax", [](R r) -> FieldValue { return double(r.amax); }},
        {"scale", [](R r) -> FieldValue { return double(r.scale); }},
        {"scale_inv", [](R r) -> FieldValue { return double(r.scale_inv); }},
        {"cast_underflow_share", [](R r) -> FieldValue { return cast_underflow_share(r); }},
        {"cast_saturated", [](R r) -> FieldValue { return r.cast_saturated; }},
        {"order_spread", [](R r) -> FieldValue { return r.order_spread; }},
        {"order_differs", [](R r) -> FieldValue { return r.order_differs; }},
        {"extra_margin", [](R r) -> FieldValue { return std::int64_t(r.extra_margin); }},
    };
    return t;
}

const io::FieldTable<OrderRow>& order_fields() {
    using R = const OrderRow&;
    static const io::FieldTable<OrderRow> t = {
        {"hop_overflows", [](R r) -> FieldValue { return r.order.hop_overflows; }},
        {"stalled_share", [](R r) -> FieldValue { return stalled_share(r.order); }},
        {"max_partial", [](R r) -> FieldValue { return r.order.max_partial; }},
        {"rel_error", [](R r) -> FieldValue { return r.order.rel_error; }},
        {"sqnr_db", [](R r) -> FieldValue { return r.order.sqnr_db; }},
        {"underflow_share", [](R r) -> FieldValue { return underflow_share(r.result, r.order); }},
        {"nonfinite", [](R r) -> FieldValue { return r.order.nonfinite; }},
    };
    return t;
}

}  // namespace fp8kit::simulate
