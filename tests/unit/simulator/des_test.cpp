// The discrete-event engine and its resources, alone. Expected times are worked by hand.
#include <gtest/gtest.h>

#include <vector>

#include "simulator/des/engine.h"
#include "simulator/des/resources.h"

namespace dtplan::des {
namespace {

// Records (time, kind, payload) of every event it receives.
struct Recorder final : Handler {
  struct Hit {
    double t;
    uint32_t kind;
    uint64_t payload;
  };
  std::vector<Hit> hits;
  void on_event(Engine& e, uint32_t kind, uint64_t payload) override {
    hits.push_back({e.now(), kind, payload});
  }
};

TEST(Engine, DeliversInTimeThenInsertionOrder) {
  Engine e;
  Recorder r;
  const auto id = e.add_handler(&r);
  e.schedule_at(2.0, id, 1);
  e.schedule_at(1.0, id, 2);
  e.schedule_at(2.0, id, 3);  // same time as kind 1: after it
  e.schedule_at(0.5, id, 4);
  EXPECT_EQ(e.run(), 4u);
  ASSERT_EQ(r.hits.size(), 4u);
  EXPECT_EQ(r.hits[0].kind, 4u);
  EXPECT_EQ(r.hits[1].kind, 2u);
  EXPECT_EQ(r.hits[2].kind, 1u);
  EXPECT_EQ(r.hits[3].kind, 3u);
  EXPECT_DOUBLE_EQ(e.now(), 2.0);
}

TEST(Engine, RunUntilStopsAndResumes) {
  Engine e;
  Recorder r;
  const auto id = e.add_handler(&r);
  for (int i = 1; i <= 5; ++i) e.schedule_at(i, id, 0, static_cast<uint64_t>(i));
  EXPECT_EQ(e.run(2.5), 2u);
  EXPECT_EQ(e.run(), 3u);
  EXPECT_EQ(r.hits.back().payload, 5u);
}

// A handler that reschedules itself: chains of events.
struct Chain final : Handler {
  Engine::HandlerId id = 0;
  uint64_t left = 0;
  void on_event(Engine& e, uint32_t, uint64_t) override {
    if (left-- > 1) e.schedule_in(1e-6, id, 0);
  }
};

TEST(Engine, ChainsProcessEveryEvent) {
  Engine e;
  Chain c;
  c.id = e.add_handler(&c);
  c.left = 1000;
  e.schedule_at(0, c.id, 0);
  EXPECT_EQ(e.run(), 1000u);
  EXPECT_NEAR(e.now(), 999e-6, 1e-12);
}

TEST(Stream, RunsTasksOneAfterAnother) {
  Engine e;
  Recorder r;
  const auto id = e.add_handler(&r);
  Stream s(e);
  s.submit(1.0, {id, 1, 0});
  s.submit(2.0, {id, 2, 0});
  s.submit(0.5, {id, 3, 0});
  e.run();
  ASSERT_EQ(r.hits.size(), 3u);
  EXPECT_DOUBLE_EQ(r.hits[0].t, 1.0);
  EXPECT_DOUBLE_EQ(r.hits[1].t, 3.0);
  EXPECT_DOUBLE_EQ(r.hits[2].t, 3.5);
  EXPECT_DOUBLE_EQ(s.busy_s(), 3.5);
}

TEST(FlowNetwork, TwoFlowsShareALinkEqually) {
  // 100 B each over one 100 B/s link: alone 1 s; together 50 B/s each, both done at 2 s.
  Engine e;
  Recorder r;
  const auto id = e.add_handler(&r);
  FlowNetwork net(e);
  const int link = net.add_link(100);
  net.start_flow({link}, 100, {id, 1, 0});
  net.start_flow({link}, 100, {id, 2, 0});
  e.run();
  ASSERT_EQ(r.hits.size(), 2u);
  EXPECT_NEAR(r.hits[0].t, 2.0, 1e-12);
  EXPECT_NEAR(r.hits[1].t, 2.0, 1e-12);
}

TEST(FlowNetwork, MaxMinFairnessAndReallocationOnCompletion) {
  // Link A 100 B/s, link B 30 B/s. Flow 1 uses A; flow 2 uses A and B.
  // Max-min: flow 2 is held to 30 by B, flow 1 gets the remaining 70 of A.
  // Flow 1 (140 B) ends at 2 s; flow 2 (90 B) has sent 60 B by then and keeps 30 B/s: ends 3 s.
  Engine e;
  Recorder r;
  const auto id = e.add_handler(&r);
  FlowNetwork net(e);
  const int a = net.add_link(100), b = net.add_link(30);
  const int f1 = net.start_flow({a}, 140, {id, 1, 0});
  const int f2 = net.start_flow({a, b}, 90, {id, 2, 0});
  EXPECT_DOUBLE_EQ(net.rate(f1), 70);
  EXPECT_DOUBLE_EQ(net.rate(f2), 30);
  e.run();
  ASSERT_EQ(r.hits.size(), 2u);
  EXPECT_EQ(r.hits[0].kind, 1u);
  EXPECT_NEAR(r.hits[0].t, 2.0, 1e-9);
  EXPECT_EQ(r.hits[1].kind, 2u);
  EXPECT_NEAR(r.hits[1].t, 3.0, 1e-9);
}

TEST(FlowNetwork, AnEndReachesFlowsThatShareNoLinkWithIt) {
  // Link B 100 B/s carries flows 1 and 2, link C 60 B/s flows 2 and 3, link D 100 B/s flow 4.
  // Max-min: C is the tighter (30 each for 2 and 3), then flow 1 takes B's remaining 70; flow 4
  // has D alone. Flow 3 (30 B) ends at 1 s; flow 2 is then held by B (50 each), so flow 1
  // slows to 50 although it never shared a link with flow 3. Flow 2 (80 B: 30 sent, 50 left)
  // ends at 2 s; flow 1 (170 B: 70 + 50 sent) has B alone and its last 50 B end at 2.5 s;
  // flow 4 (300 B) ends at 3 s, untouched.
  Engine e;
  Recorder r;
  const auto id = e.add_handler(&r);
  FlowNetwork net(e);
  const int b = net.add_link(100), c = net.add_link(60), d = net.add_link(100);
  const int f1 = net.start_flow({b}, 170, {id, 1, 0});
  const int f2 = net.start_flow({b, c}, 80, {id, 2, 0});
  const int f3 = net.start_flow({c}, 30, {id, 3, 0});
  const int f4 = net.start_flow({d}, 300, {id, 4, 0});
  EXPECT_DOUBLE_EQ(net.rate(f1), 70);
  EXPECT_DOUBLE_EQ(net.rate(f2), 30);
  EXPECT_DOUBLE_EQ(net.rate(f3), 30);
  EXPECT_DOUBLE_EQ(net.rate(f4), 100);
  e.run();
  ASSERT_EQ(r.hits.size(), 4u);
  const double expected[] = {1.0, 2.0, 2.5, 3.0};
  const uint32_t order[] = {3, 2, 1, 4};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r.hits[i].kind, order[i]);
    EXPECT_NEAR(r.hits[i].t, expected[i], 1e-9);
  }
}

TEST(FlowNetwork, LateArrivalSlowsTheFirstFlow) {
  // 100 B/s link. Flow 1: 150 B at t=0. Flow 2: 50 B at t=1 (flow 1 has 50 B left).
  // From t=1 both run at 50 B/s: both finish at t=2.
  Engine e;
  Recorder r;
  const auto id = e.add_handler(&r);
  FlowNetwork net(e);
  const int link = net.add_link(100);
  net.start_flow({link}, 150, {id, 1, 0});
  struct Starter final : Handler {
    FlowNetwork* net;
    int link;
    Engine::HandlerId notify;
    void on_event(Engine&, uint32_t, uint64_t) override {
      net->start_flow({link}, 50, {notify, 2, 0});
    }
  } starter;
  starter.net = &net;
  starter.link = link;
  starter.notify = id;
  e.schedule_at(1.0, e.add_handler(&starter), 0);
  e.run();
  ASSERT_EQ(r.hits.size(), 2u);
  EXPECT_NEAR(r.hits[0].t, 2.0, 1e-9);
  EXPECT_NEAR(r.hits[1].t, 2.0, 1e-9);
}

TEST(FlowNetwork, SharingOffRunsEachFlowAsIfAlone) {
  Engine e;
  Recorder r;
  const auto id = e.add_handler(&r);
  FlowNetwork net(e, /*sharing=*/false);
  const int link = net.add_link(100);
  net.start_flow({link}, 100, {id, 1, 0});
  net.start_flow({link}, 100, {id, 2, 0});
  e.run();
  EXPECT_NEAR(r.hits[0].t, 1.0, 1e-12);
  EXPECT_NEAR(r.hits[1].t, 1.0, 1e-12);
}

}  // namespace
}  // namespace dtplan::des

#include "simulator/des/topology.h"
#include "tests/unit/simulator/two_nodes.h"

namespace dtplan::des {
namespace {

TEST(Topology, RoutesFollowNvlinkRailsAndPxn) {
  Engine e;
  FlowNetwork net(e);
  const HardwareProfile hw = two_nodes_two_rails();
  Topology t(hw, 4, net);
  // Same node: up to the NVSwitch and down (2 links at NVLink rate, 300 GB/s).
  EXPECT_EQ(t.route(0, 1).size(), 2u);
  EXPECT_DOUBLE_EQ(t.bottleneck_bytes_per_s(t.route(0, 1)), 300e9);
  // Same rail across nodes: GPU -> NIC -> leaf -> NIC -> GPU at the NIC rate.
  EXPECT_EQ(t.route(0, 2).size(), 4u);
  EXPECT_DOUBLE_EQ(t.bottleneck_bytes_per_s(t.route(0, 2)), 25e9);
  // Across rails: NVLink to the GPU on the destination rail first (PXN), 6 links.
  const std::vector<int> cross = t.route(2, 1);
  ASSERT_EQ(cross.size(), 6u);
  EXPECT_EQ(cross[0], t.route(2, 3)[0]);  // leaves over NVLink, like 2 -> 3
  // Routes are cached and stable.
  EXPECT_EQ(&t.route(0, 2), &t.route(0, 2));
  EXPECT_TRUE(t.route(1, 1).empty());
}

TEST(Topology, OnlyLinksOnARouteEnterTheFlowNetwork) {
  Engine e;
  FlowNetwork net(e);
  HardwareProfile hw = two_nodes_two_rails();
  hw.node.gpus_per_node = 8;
  hw.node.nvlink_domain_gpus = 8;
  hw.scale_out.nics_per_node = 8;
  // 16,384 GPUs: nothing exists until a route asks for it.
  Topology t(hw, 16384, net);
  EXPECT_EQ(t.links(), 0);
  // Rail 0 to rail 7: NVLink to GPU 7 of node 0 first, then rail 7 (6 links, all new).
  EXPECT_EQ(t.route(0, 16383).size(), 6u);
  EXPECT_EQ(t.links(), 6);
  // GPU 7 -> 16383 is the same rail: it reuses the last four links of that route.
  const std::vector<int> direct = t.route(7, 16383);
  ASSERT_EQ(direct.size(), 4u);
  EXPECT_EQ(t.links(), 6);
  EXPECT_EQ(direct, std::vector<int>(t.route(0, 16383).begin() + 2, t.route(0, 16383).end()));
}

}  // namespace
}  // namespace dtplan::des
