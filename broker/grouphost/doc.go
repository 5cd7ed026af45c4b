// Package grouphost hosts the consumer-group coordinator (issue 19: the
// broker runtime's part of consumer groups, out of the protocol layer).
// Package group is the pure membership and offset logic over a group.Log;
// package server decodes JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// OffsetCommit, OffsetFetch, TxnOffsetCommit and the rest, calls the
// coordinator a Host holds, and encodes the answer. The Host owns
// everything beneath:
//
//   - the group.Log (and group.TxnLog) over the engine's
//     __consumer_offsets topic: a write is one record batch appended to
//     the group's partition and acknowledged like an acks=all produce
//     (Config.WhenAcked: durable here, or committed to the ISR), so an
//     OffsetCommit or SyncGroup is answered only once its record survives
//     a crash; TxnOffsetCommit's records are a transactional batch of the
//     committing producer and stay staged on load until its marker;
//   - on a single broker (Config.Cluster nil), the topic created locally
//     on the first write (offsets.topic.num.partitions partitions,
//     cleanup.policy=compact) and every partition loaded at start;
//   - in cluster mode, the topic proposed to the controller on the first
//     FindCoordinator for a group (replication min(3, live brokers)), as
//     Kafka does, and a coordhost.Host's leader loop that loads a
//     partition when this broker becomes its leader (again at every new
//     leader epoch) and unloads it when leadership moves away, so after a
//     coordinator fails the new leader replays the replicated commits and
//     the group reforms there. Route names a group's coordinator: the
//     leader of its partition.
//
// # What it needs of the broker
//
// grouphost does not import server: the broker hands it the engine, a
// coordhost.Source of cluster views (nil on a single broker), a leadership
// check before each append, WhenAcked, a coordhost.Creator and a Clock.
// The package reads no wall clock: record timestamps come from the Clock.
//
// # Goroutines
//
// The coordhost.Host's leader loop and the coordinator's own tick belong
// to the Host and end in Close. Appends complete on whatever goroutine
// WhenAcked calls back on (a flush worker, the replica manager).
//
// # Files
//
//   - host.go: Config, Host — New (single-broker load or the leader
//     loop), Coordinator, Route, Close; the topic's replication and
//     configs.
//   - offsets.go: offsetsLog, group.Log and group.TxnLog over
//     __consumer_offsets (Append, Load, AppendTxn, LoadTxn).
package grouphost
