#include "simulator/des/topology.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <limits>
#include <set>
#include <unordered_map>

#include "core/units.h"

namespace dtplan::des {

namespace {

struct EdgeProps {
  double capacity_bytes_per_s = 0;
  double nominal_bytes_per_s = 0;
  int link = -1;  // flow-network link, created on first use
};

using BGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property,
                                     EdgeProps>;
using Vertex = boost::graph_traits<BGraph>::vertex_descriptor;
using Edge = boost::graph_traits<BGraph>::edge_descriptor;

}  // namespace

struct Topology::Graph {
  BGraph g;
  std::unordered_map<int, Vertex> gpu;  // global rank -> vertex
  // Breadth-first search scratch, reused by every route: the tree edge into each vertex and
  // the search that reached it last.
  std::vector<Edge> via;
  std::vector<uint32_t> seen;
  std::vector<Vertex> queue;
  uint32_t search = 0;
};

Topology::Topology(const HardwareProfile& hw, int num_gpus, const std::vector<int>& gpus,
                   FlowNetwork& net, const std::vector<std::pair<int, double>>& slow_nodes)
    : g_(std::make_unique<Graph>()), net_(net) {
  const int per_node = std::max(1, hw.node.gpus_per_node);
  const int domain = std::max(per_node, hw.node.placement_domain_gpus());
  const int nics = std::max(1, hw.scale_out.nics_per_node);
  const int nodes = std::max(1, (num_gpus + per_node - 1) / per_node);
  const double nvlink = hw.node.nvlink_gbps_per_direction * units::kGB;
  const double nic = hw.scale_out.nic_gbps * units::kGB;
  const double uplink = nodes * nic / std::max(1.0, hw.scale_out.oversubscription);
  BGraph& g = g_->g;
  auto both = [&](Vertex a, Vertex b, double cap, double slow = 1.0) {
    boost::add_edge(a, b, EdgeProps{cap / slow, cap, -1}, g);
    boost::add_edge(b, a, EdgeProps{cap / slow, cap, -1}, g);
  };
  auto slowness = [&](int node) {
    double f = 1.0;
    for (const auto& [n, x] : slow_nodes)
      if (n == node) f = std::max(f, x);
    return f;
  };
  const Vertex spine = boost::add_vertex(g);
  std::vector<Vertex> leaf(static_cast<size_t>(nics));
  for (auto& l : leaf) {
    l = boost::add_vertex(g);
    both(l, spine, uplink);
  }
  std::set<int> used_nodes;
  for (int r : gpus) used_nodes.insert(std::clamp(r, 0, num_gpus - 1) / per_node);
  std::unordered_map<int, Vertex> nvswitch;  // per NVLink domain
  for (int n : used_nodes) {
    const int dom = n * per_node / domain;
    auto sw = nvswitch.find(dom);
    if (sw == nvswitch.end()) sw = nvswitch.emplace(dom, boost::add_vertex(g)).first;
    const double slow = slowness(n);
    std::vector<Vertex> nic_v(static_cast<size_t>(nics));
    for (int k = 0; k < nics; ++k) {
      nic_v[static_cast<size_t>(k)] = boost::add_vertex(g);
      both(nic_v[static_cast<size_t>(k)], leaf[static_cast<size_t>(k)], nic, slow);
    }
    for (int l = 0; l < per_node && n * per_node + l < num_gpus; ++l) {
      const Vertex v = boost::add_vertex(g);
      g_->gpu[n * per_node + l] = v;
      both(v, sw->second, nvlink);
      both(v, nic_v[static_cast<size_t>(l * nics / per_node)], nic, slow);
    }
  }
}

Topology::~Topology() = default;

int Topology::vertices() const { return static_cast<int>(boost::num_vertices(g_->g)); }

const std::vector<int>& Topology::route(int src, int dst) {
  const auto key = std::make_pair(src, dst);
  auto it = routes_.find(key);
  if (it != routes_.end()) return it->second;
  std::vector<int> links;
  auto s = g_->gpu.find(src), d = g_->gpu.find(dst);
  if (src != dst && s != g_->gpu.end() && d != g_->gpu.end()) {
    BGraph& g = g_->g;
    Graph& sc = *g_;
    const size_t nv = boost::num_vertices(g);
    sc.via.resize(nv);
    sc.seen.resize(nv, 0);
    const uint32_t search = ++sc.search;
    // Breadth-first search from the source, edges in insertion order, recording the tree edge
    // into each vertex; it stops when the destination is reached (the tree edge into it is the
    // one a full search would record).
    sc.queue.assign(1, s->second);
    sc.seen[s->second] = search;
    for (size_t head = 0; head < sc.queue.size() && sc.seen[d->second] != search; ++head) {
      for (auto [e, end] = boost::out_edges(sc.queue[head], g); e != end; ++e) {
        const Vertex t = boost::target(*e, g);
        if (sc.seen[t] == search) continue;
        sc.seen[t] = search;
        sc.via[t] = *e;
        sc.queue.push_back(t);
        if (t == d->second) break;
      }
    }
    std::vector<Edge>& via = sc.via;
    if (sc.seen[d->second] == search) {
      std::vector<Edge> path;
      for (Vertex v = d->second; v != s->second; v = boost::source(via[v], g))
        path.push_back(via[v]);
      std::reverse(path.begin(), path.end());
      for (Edge e : path) {
        EdgeProps& ep = g[e];
        if (ep.link < 0) {
          ep.link = net_.add_link(ep.capacity_bytes_per_s);
          nominal_[ep.link] = ep.nominal_bytes_per_s;
        }
        links.push_back(ep.link);
      }
    }
  }
  return routes_.emplace(key, std::move(links)).first->second;
}

std::vector<int> Topology::ring_route(int pred, int self, int succ) {
  const std::vector<int> out = route(self, succ);
  const std::vector<int> in = route(pred, self);
  std::vector<int> links(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(out.size() / 2));
  links.insert(links.end(), in.begin() + static_cast<std::ptrdiff_t>(in.size() / 2), in.end());
  return links;
}

double Topology::bottleneck_bytes_per_s(const std::vector<int>& links) const {
  double r = std::numeric_limits<double>::infinity();
  for (int l : links) {
    const auto it = nominal_.find(l);
    r = std::min(r, it != nominal_.end() ? it->second : net_.capacity(l));
  }
  return r;
}

}  // namespace dtplan::des
