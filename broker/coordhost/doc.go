// Package coordhost hosts a coordinator on the partitions of its internal
// topic that this node leads: the group coordinator on __consumer_offsets,
// the transaction coordinator on __transaction_state, and the share-group
// coordinator to come. It is the first piece of the broker runtime (issue
// 19): package server keeps the protocol and gives the host three narrow
// inputs — a Source of cluster Views (which partitions this node leads, at
// which leader epoch; who leads a partition; how many brokers are live), a
// Creator that proposes a topic to the controller, and a Clock — and the
// coordinator gives it load(partition, epoch) and unload(partition).
// coordhost imports nothing of the module.
//
// # What the host does
//
//   - Follow runs the leader loop: at every view change (View.Changed) and
//     every Config.Retry in between, it plans what takes the partitions it
//     has loaded to those the view says this node leads, and carries the
//     plan out one action at a time. A partition is loaded when it becomes
//     led and again at every new leader epoch (a new coordinator
//     generation: transaction markers carry it); it is unloaded when
//     leadership moves away. A failed load is retried at the next wakeup
//     while the partition is still led.
//   - Every calls a callback with the clock's time at a fixed period (the
//     transaction coordinator's timeouts).
//   - Coordinator names the node coordinating a key (the leader of the
//     key's partition) and Ensure reports whether the topic exists; both
//     start the topic's proposal when it is missing, one at a time, with
//     the replication factor capped by the live brokers.
//
// # Goroutines and time
//
// The leader loop and every Every loop belong to the Host and end in
// Close, which waits for them; a load in progress finishes first. Load and
// Unload run on the leader loop, one at a time. A proposal's work runs on a
// goroutine the Creator owns. The package reads no wall clock: wakeups and
// the time handed to callbacks come from Config.Clock, so tests drive
// every wakeup.
//
// # Files
//
//   - plan.go: the pure decision — Leadership, Action and Plan (led vs
//     loaded partitions to loads and unloads), Leadership.Done (recording
//     an action's outcome).
//   - host.go: Config, Host, New, Follow (the leader loop), Every, Close.
//   - route.go: Coordinator and Ensure, the topic's single proposal.
//   - topic.go: Topic (name, partitions, wanted replication, configs) and
//     Spec, the proposal for a given number of live brokers.
//   - view.go: the inputs — View, Source, Creator, Clock.
package coordhost
