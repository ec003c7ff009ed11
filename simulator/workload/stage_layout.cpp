#include "simulator/workload/stage_layout.h"

#include <algorithm>

#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan {

// Layers in chunk c of n chunks (even split; with uneven_pp the first and last chunks give up
// the remainder so every middle chunk has ceil(L/n): uneven_ends()).
static void chunk_range(int layers, int n, int c, bool uneven, int& begin, int& end) {
  if (!uneven || layers % n == 0 || n <= 2) {
    begin = static_cast<int>(static_cast<long long>(layers) * c / n);
    end = static_cast<int>(static_cast<long long>(layers) * (c + 1) / n);
    return;
  }
  const UnevenEnds u = uneven_ends(layers, n);
  const int mid = u.middle, first = u.first, last = u.last;
  if (c == 0) {
    begin = 0;
    end = first;
  } else if (c == n - 1) {
    begin = layers - last;
    end = layers;
  } else {
    begin = first + (c - 1) * mid;
    end = std::min(layers - last, begin + mid);
  }
}

// With the embedding and/or loss counted as layers: chunk c of n holds (L + e + l)/n slots, the
// first chunk's first being the embedding and the last chunk's last the loss.
static void counted_range(int layers, int n, int c, int e, int l, int& begin, int& end) {
  const int per = (layers + e + l) / n;
  begin = std::max(0, c * per - e);
  end = c == n - 1 ? layers : (c + 1) * per - e;
}

RankLayers layers_on_rank(const ModelSpec& m, const Plan& p, int rank) {
  RankLayers r = decoder_layers_on_rank(m, p, rank);
  // DeepSeek's multi-token-prediction modules run on the loss rank after its decoder layers,
  // each with one transformer layer of the last layer's kind (Megatron-Core builds them there:
  // gpt_model.py mtp_process, and counts them as such in training.py
  // num_floating_point_operations, "num_moe_layers += last_layer_is_moe * mtp_num_layers",
  // NVIDIA/Megatron-LM @d98e8a6).
  if (m.mtp_layers > 0 && rank == loss_rank(p)) {
    if (m.is_moe_layer(m.layers - 1))
      r.moe += m.mtp_layers;
    else
      r.dense += m.mtp_layers;
  }
  return r;
}

RankLayers decoder_layers_on_rank(const ModelSpec& m, const Plan& p, int rank) {
  RankLayers r;
  auto add = [&](LayerRange c) {
    const int moe = m.moe_layers_before(c.end) - m.moe_layers_before(c.begin);
    r.moe += moe;
    r.dense += c.size() - moe;
  };
  if (p.split_stages > 0 && p.split_stages < p.pp) {
    add(chunk_layers(m, p, rank));
    return r;
  }
  const bool counted = p.account_for_embedding || p.account_for_loss;
  if (!m.moe && !counted && m.layers % (p.pp * p.vpp) == 0) {  // the common case: even, dense
    r.dense = m.layers / p.pp;
    return r;
  }
  // A V-shaped schedule runs its odd chunks back down: rank r holds chunks r and 2p - 1 - r.
  const bool v_shape = v_shaped(p);
  for (int v = 0; v < p.vpp; ++v)
    add(chunk_layers(m, p, v * p.pp + (v_shape && v % 2 == 1 ? p.pp - 1 - rank : rank)));
  return r;
}

LayerRange chunk_layers(const ModelSpec& m, const Plan& p, int chunk) {
  LayerRange r;
  if (p.split_stages > 0 && p.split_stages < p.pp) {
    const int k = p.split_stages, a = p.split_layers;
    const int rest = (m.layers - k * a) / (p.pp - k);
    r.begin = chunk < k ? chunk * a : k * a + (chunk - k) * rest;
    r.end = r.begin + (chunk < k ? a : rest);
    return r;
  }
  const int chunks = p.pp * p.vpp;
  if (p.account_for_embedding || p.account_for_loss)
    counted_range(m.layers, chunks, chunk, p.account_for_embedding ? 1 : 0,
                  p.account_for_loss ? 1 : 0, r.begin, r.end);
  else
    chunk_range(m.layers, chunks, chunk, p.uneven_pp, r.begin, r.end);
  return r;
}

RankLayers recomputed_layers(const Plan& p, const RankLayers& l) {
  if (p.recompute != Recompute::kFull || p.recompute_layers <= 0) return l;
  const int rec = std::min(p.recompute_layers * p.vpp, l.total());
  RankLayers r;
  r.dense = std::min(rec, l.dense);
  r.moe = rec - r.dense;
  return r;
}

RankLayers offloaded_layers(const Plan& p, const RankLayers& l) {
  RankLayers r;
  if (p.offload_layers <= 0) return r;
  const int off = std::min(p.offload_layers * p.vpp, l.total());
  r.dense = std::min(off, l.dense);
  r.moe = off - r.dense;
  return r;
}

}  // namespace dtplan
