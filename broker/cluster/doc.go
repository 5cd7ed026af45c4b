// Package cluster is the broker's part of a replicated cluster (issue 5),
// moving out of the protocol layer (issue 19): package server decodes,
// authorizes and encodes, and calls this package for what a broker does
// as a member of the cluster:
//
//   - Membership (membership.go): registration with the controller and
//     heartbeats. Join registers with a fresh incarnation id once the
//     advertised port is known, waits until this node's controller has
//     applied the metadata up to the registration (CaughtUp: a restarting
//     node replays its Raft log from an old or empty state, and acting on
//     that would delete topics that still exist), then heartbeats every
//     broker.heartbeat.interval.ms with the metadata offset applied, and
//     registers again when the controller no longer knows the
//     registration. ControlledShutdown asks the controller to move this
//     broker's leaderships away and waits until it has.
//
//   - the replica manager's interface (replication.go): ReplicaManager,
//     the PartitionRole the broker's metadata reconcile hands it,
//     ReplicationEnv, NewReplicaManager (package replica's Manager), and
//     AlterISR, a leader's ISR change proposed to the controller (Kafka's
//     AlterPartition) with the broker's epoch.
//
//   - the metadata view (view.go): View, an immutable snapshot of the
//     controller's state (brokers; topics with their partitions' leader,
//     ISR, epochs, offline replicas and reassignment) that request handlers
//     read without locks; BuildView makes one.
//
//   - the reconcile (reconcile.go): Reconciler makes the engine's topics
//     and logs and the replica manager's roles match each new View.
//
//   - the security state (security.go): SecuritySync seeds the cluster's
//     replicated ACLs, SCRAM credentials and client quotas from this
//     broker's stores once, then applies the controller's to them whenever
//     they change; ACLOf, BindingOf, QuotaEntityOf and AuthQuotaEntityOf
//     convert between package auth's types and the controller's.
//
// The request hooks built on the view (leadership checks, admin requests'
// proposals) stay in package server (server/cluster.go).
//
// # Goroutines
//
// A Membership owns one goroutine, the heartbeat loop, which Close cancels
// and waits for. A Reconciler starts none: its owner (the broker's
// metadata watcher) calls it from one goroutine. SecuritySync.Run runs on
// its caller's goroutine until the caller's context ends. The replica manager owns
// its fetchers and checks (package replica) and ends them in its Close.
//
// # Files
//
//   - membership.go: MembershipConfig, Membership — Join, Epoch, CaughtUp,
//     ControlledShutdown, Close; the registration and heartbeat loop.
//   - replication.go: ReplicationEnv, PartitionRole, ReplicaManager,
//     NewReplicaManager, AlterISR and the ISR updater the replica
//     manager proposes through.
//   - view.go: View, Broker, Topic, Partition, BuildView, EmptyView.
//   - reconcile.go: Reconciler, EngineConfigs, MinInsync and the
//     cluster-level topic config keys.
//   - security.go: SecurityStores, SecuritySync, the auth/controller
//     conversions.
package cluster
