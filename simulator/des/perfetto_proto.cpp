#include "simulator/des/perfetto_proto.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <unordered_map>

namespace dtplan::des {

namespace {

// Field numbers (Perfetto trace protos; see the header).
constexpr int kTracePacket = 1;                     // Trace.packet
constexpr int kPacketTimestamp = 8;                 // TracePacket.timestamp (uint64, ns)
constexpr int kPacketSequenceId = 10;               // TracePacket.trusted_packet_sequence_id
constexpr int kPacketTrackEvent = 11;               // TracePacket.track_event
constexpr int kPacketTrackDescriptor = 60;          // TracePacket.track_descriptor
constexpr int kEventType = 9;                       // TrackEvent.type (enum)
constexpr int kEventTrackUuid = 11;                 // TrackEvent.track_uuid (uint64)
constexpr int kEventCategories = 22;                // TrackEvent.categories (repeated string)
constexpr int kEventName = 23;                      // TrackEvent.name
constexpr int kEventFlowIds = 47;                   // TrackEvent.flow_ids (repeated fixed64)
constexpr int kEventTerminatingFlowIds = 48;        // TrackEvent.terminating_flow_ids
constexpr int kDescriptorUuid = 1;                  // TrackDescriptor.uuid
constexpr int kDescriptorProcess = 3;               // TrackDescriptor.process
constexpr int kDescriptorThread = 4;                // TrackDescriptor.thread
constexpr int kDescriptorParentUuid = 5;            // TrackDescriptor.parent_uuid
constexpr int kProcessPid = 1;                      // ProcessDescriptor.pid
constexpr int kProcessName = 6;                     // ProcessDescriptor.process_name
constexpr int kThreadPid = 1;                       // ThreadDescriptor.pid
constexpr int kThreadTid = 2;                       // ThreadDescriptor.tid
constexpr int kThreadName = 5;                      // ThreadDescriptor.thread_name
constexpr uint64_t kSliceBegin = 1, kSliceEnd = 2;  // TrackEvent.Type
constexpr uint64_t kSequence = 1;

// Wire format: varint (0), 64-bit (1), length-delimited (2).
void varint(std::string& o, uint64_t v) {
  while (v >= 0x80) {
    o += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  o += static_cast<char>(v);
}
void key(std::string& o, int field, int wire) {
  varint(o, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire));
}
void put_varint(std::string& o, int field, uint64_t v) {
  key(o, field, 0);
  varint(o, v);
}
void put_bytes(std::string& o, int field, const std::string& s) {
  key(o, field, 2);
  varint(o, s.size());
  o += s;
}
void put_fixed64(std::string& o, int field, uint64_t v) {
  key(o, field, 1);
  for (int i = 0; i < 8; ++i) o += static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t ns(double s) { return static_cast<uint64_t>(std::llround(std::max(0.0, s) * 1e9)); }

}  // namespace

std::string trace_proto(const std::vector<TraceEvent>& trace,
                        const std::vector<TraceProcess>& processes) {
  std::string out;
  write_trace_proto(trace, processes, [&](std::string_view piece) { out += piece; });
  return out;
}

void write_trace_proto(const std::vector<TraceEvent>& trace,
                       const std::vector<TraceProcess>& processes, const TraceSink& sink) {
  const TraceLayout l = trace_layout(trace, processes);
  auto process_uuid = [](size_t i) { return static_cast<uint64_t>(i + 1) << 20; };
  auto thread_uuid = [&](size_t i, size_t k) { return process_uuid(i) | (k + 1); };
  std::string out, packet, inner, sub;
  // Packets go to the sink in pieces of about 1 MiB.
  auto emit = [&] {
    put_bytes(out, kTracePacket, packet);
    packet.clear();
    if (out.size() >= (1u << 20)) {
      sink(out);
      out.clear();
    }
  };
  // Tracks: a process per entry, a thread per stream it uses (compute always).
  for (size_t i = 0; i < processes.size(); ++i) {
    const auto pid = static_cast<uint64_t>(i + 1);
    sub.clear();
    put_varint(sub, kProcessPid, pid);
    put_bytes(sub, kProcessName, processes[i].name);
    inner.clear();
    put_varint(inner, kDescriptorUuid, process_uuid(i));
    put_bytes(inner, kDescriptorProcess, sub);
    put_bytes(packet, kPacketTrackDescriptor, inner);
    put_varint(packet, kPacketSequenceId, kSequence);
    emit();
    for (size_t k = 0; k < l.threads_used[i].size(); ++k) {
      if (!l.threads_used[i][k]) continue;
      sub.clear();
      put_varint(sub, kThreadPid, pid);
      put_varint(sub, kThreadTid, (pid << 20) + k);
      put_bytes(sub, kThreadName, trace_thread_name(k));
      inner.clear();
      put_varint(inner, kDescriptorUuid, thread_uuid(i, k));
      put_varint(inner, kDescriptorParentUuid, process_uuid(i));
      put_bytes(inner, kDescriptorThread, sub);
      put_bytes(packet, kPacketTrackDescriptor, inner);
      put_varint(packet, kPacketSequenceId, kSequence);
      emit();
    }
  }
  // Slices as begin and end events in time order; at one time, the ends of slices that began
  // earlier, then the begins, then the ends of slices of no length (each after its begin).
  struct Edge {
    uint64_t ts;
    int phase;  // 0: end of an earlier slice, 1: begin, 2: end of a slice of no length
    bool begin;
    size_t event;
  };
  std::vector<Edge> edges;
  for (size_t e = 0; e < trace.size(); ++e) {
    if (l.process[e] < 0) continue;
    const uint64_t from = ns(trace[e].start_s), to = std::max(from, ns(trace[e].end_s));
    edges.push_back({from, 1, true, e});
    edges.push_back({to, to == from ? 2 : 0, false, e});
  }
  std::stable_sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
    return a.ts < b.ts || (a.ts == b.ts && a.phase < b.phase);
  });
  for (const Edge& x : edges) {
    const TraceEvent& t = trace[x.event];
    const auto pid = static_cast<size_t>(l.process[x.event]);
    const auto k = static_cast<size_t>(l.thread[x.event]);
    inner.clear();
    put_varint(inner, kEventType, x.begin ? kSliceBegin : kSliceEnd);
    put_varint(inner, kEventTrackUuid, thread_uuid(pid, k));
    if (x.begin) {
      put_bytes(inner, kEventCategories, trace_category(t));
      put_bytes(inner, kEventName, t.name);
      if (l.flow_shown[x.event])
        put_fixed64(inner,
                    t.stream == StreamKind::kPpSend ? kEventFlowIds : kEventTerminatingFlowIds,
                    static_cast<uint64_t>(t.flow) + 1);
    }
    put_varint(packet, kPacketTimestamp, x.ts);
    put_bytes(packet, kPacketTrackEvent, inner);
    put_varint(packet, kPacketSequenceId, kSequence);
    emit();
  }
  if (!out.empty()) sink(out);
}

}  // namespace dtplan::des
