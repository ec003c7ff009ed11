// A simulated step as a Perfetto protobuf trace (simulate --trace FILE.pftrace): a process
// track per TraceProcess, a thread track per stream, a TrackEvent slice (begin and end) per
// task or transfer, and flows from each pipeline send to its receive where both ends are shown.
// Written by hand in the protobuf wire format; the field numbers are those of Perfetto's trace
// protos (protos/perfetto/trace/trace_packet.proto, track_event/track_event.proto,
// track_event/track_descriptor.proto, process_descriptor.proto, thread_descriptor.proto), as
// compiled into perfetto_trace_pb2 of the `perfetto` PyPI package 0.59.1, which
// tests/e2e/perfetto_proto.sh decodes the output with.
#pragma once

#include <string>
#include <vector>

#include "simulator/des/step_sim.h"

namespace dtplan::des {

std::string trace_proto(const std::vector<TraceEvent>& trace,
                        const std::vector<TraceProcess>& processes);
// The same, streamed to `sink` in pieces (step_sim.h).
void write_trace_proto(const std::vector<TraceEvent>& trace,
                       const std::vector<TraceProcess>& processes, const TraceSink& sink);

}  // namespace dtplan::des
