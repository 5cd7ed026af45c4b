// Package controller keeps the cluster metadata — broker registrations,
// topics, partition assignments, leaders, ISRs, leader and partition
// epochs, topic configs — in a Raft quorum (hashicorp/raft), as Kafka's
// KRaft controller does.
//
// # Two layers
//
// State is a pure, deterministic state machine (etcd-raft style): Apply
// takes a Command and returns a Result; it reads no clock, disk or network,
// iterates maps only in sorted order and draws no random numbers (topic ids
// and broker incarnation ids come inside the commands). Time enters as data:
// RegisterBroker, BrokerHeartbeat and Tick carry NowMs, stamped by the
// proposing leader; session expiry (broker.session.timeout.ms) is decided
// inside Apply from the Tick's time. Place is the pure replica placement.
//
// Controller runs the State as raft.FSM on one node: bbolt log and stable
// store (DataDir/raft.db), file snapshots (DataDir/snapshots/, the State's
// canonical encoding), a TCP transport on the node's quorum address.
//
// # State layout
//
//	State
//	  offset   int64                 commands applied (every Apply adds one)
//	  brokers  id → Broker           id, incarnation, host, port, rack, epoch (offset of its
//	                                 registration), fenced, shuttingDown, lastHeartbeatMs,
//	                                 listeners (name, host, port each; nil: host, port serve all)
//	  nextProducerID int64           first producer id not yet in a block (producerids.go)
//	  sec                            ACLs, SCRAM credentials (salted, never a password),
//	                                 client quotas, seeded kinds (security.go)
//	  topics   name → Topic, id → Topic
//	           Topic: name, 16-byte id, configs, partitions[i]
//	           Partition: replicas (preference order), isr (replica order), leader (-1: offline),
//	                      leaderEpoch, partitionEpoch, adding, removing (reassignment)
//
// Rules Apply keeps (State.Check verifies them): the ISR is a non-empty
// subset of the replicas; the leader is a live ISR member or -1; every
// leader change bumps the leader epoch; every change of a partition bumps
// its partition epoch. Fencing a broker (session expiry, FenceBroker, a new
// incarnation registering, WantFence) removes it from every ISR it is not
// the last member of and re-elects the partitions it led: the first replica
// in replica order that is live and in the ISR, else -1 (unclean election
// only when the topic sets unclean.leader.election.enable=true). Unfencing
// elects the broker where a partition is leaderless and it is eligible.
// AlterPartition (ISR changes by a leader) is checked as Kafka's
// ReplicationControlManager does: epochs ahead of the controller's →
// NOT_CONTROLLER; an older leader epoch → FENCED_LEADER_EPOCH; not the
// leader → INVALID_REQUEST; an older partition epoch →
// INVALID_UPDATE_VERSION; an ISR that is empty, lacks the leader or names
// non-replicas → INVALID_REQUEST; fenced, shutting-down or re-registered
// members → INELIGIBLE_REPLICA. min.insync.replicas is not the FSM's
// business.
//
// # Encodings (persisted: never change a layout in place)
//
// Primitives: ints are zigzag varints, counts unsigned varints (nullable
// lists: zigzag, -1 = nil), strings count+bytes, bools one byte 0/1, ids 16
// raw bytes, maps sorted by key. Decoders keep a sticky error, check each
// count against the bytes left before allocating, and refuse trailing
// bytes.
//
//	Command  = version (1) | type u8 | body         (Raft log entry data)
//	           RegisterBroker(1): id, incarnation, host, port, rack, nowMs
//	           BrokerHeartbeat(2): id, epoch, nowMs, metadataOffset, wantFence, wantShutdown
//	           FenceBroker(3), UnfenceBroker(4): id
//	           CreateTopic(5): name, id, partitions, rf, assignment ([][]int, nullable), configs
//	           DeleteTopic(6): name, id
//	           CreatePartitions(7): topic, count, assignment (nullable)
//	           AlterConfigs(8): topic, replace, set (map), delete ([]string)
//	           AlterPartition(9): broker, brokerEpoch, [topic, partition, leaderEpoch,
//	                              partitionEpoch, [member id, member epoch]]
//	           ElectLeaders(10): type u8, [topic, partition] (nullable: all)
//	           ReassignPartitions(11): [topic, partition, replicas (nullable: cancel)]
//	           Tick(12): nowMs, sessionTimeoutMs, resetSessions
//	           AllocateProducerIDs(13): broker, brokerEpoch
//	           CreateACLs(14) .. SeedSecurity(18): security.go
//	           RegisterBrokerListeners(32): RegisterBroker's body, then listeners
//	                              [name, host, port] (a RegisterBroker with Listeners)
//	State    = "SMDS" | version (6) | offset | brokers (ascending id) | topics (ascending
//	           name) | nextProducerID (since version 2) | security (since version 3:
//	           seeded, offset, ACLs, SCRAM credentials, client quotas; security.go) |
//	           offline-directory brokers (since version 4: ascending ids) |
//	           dynamic broker configs (since version 5: brokerconfigs.go) |
//	           listeners (since version 6: [broker id, [name, host, port]] for the
//	           brokers that registered any, ascending id) |
//	           crc32c (u32 BE) of everything before it   (Raft snapshot contents)
//
// # Proposals and forwarding
//
// Propose on the leader applies through Raft; on any other node it forwards
// the encoded command to the leader over the controller RPC, which shares
// the Raft port: Raft's connections open with an RPC type byte 0..4, the
// controller RPC's with 0xC7, and a mux in front of the transport routes
// each accepted connection by that byte (see transport.go for the frames).
// With Config.ServerTLS and ClientTLS the port is mutual TLS: the mux
// completes each accepted connection's handshake (a client certificate the
// trust store verifies is required) before it reads that byte, and Raft's
// dials and the RPC's use ClientTLS. With Config.AuthenticatePeer and
// AuthenticateSelf every connection first authenticates (after the TLS
// handshake when both are set), before the mux reads that byte; the
// broker plugs in SASL when its inter-broker listener is SASL_PLAINTEXT:
// the dialling node sends Kafka's SaslHandshake v1 and SaslAuthenticate
// frames with its inter-broker credentials (sasl.Authenticate, as the
// replica fetcher does to another broker's SASL listener), the mux answers
// them with sasl.Serve against the broker's PLAIN users and SCRAM store,
// and AuthorizePrincipal asks the authorizer for ClusterAction. Kafka's
// own frames rather than a new format: they are the SASL framing of
// Kafka's SASL_PLAINTEXT controller listener
// (sasl.mechanism.controller.protocol), both sides already exist and are
// fuzzed, and a peer that skips them is refused at its first bytes (see
// sasl.go for the framing and what it does not protect). A failed
// exchange or authorization closes the connection with one WARN line
// before Raft or the RPC sees a byte.
// One request per connection, so a failure to connect or to send means "not
// applied" and is retried; a missing answer after sending is
// ErrUnknownOutcome. A follower never forwards further (no loops); a node
// that is no longer leader answers "not leader" and the caller retries
// after a short backoff until its context ends. A node whose id is not in
// the voter set is an observer: it asks the leader (RPC kind join) to add it
// as a Raft non-voter and then applies every change like a voter. An
// observer that restarts on another address joins again, which updates its
// address in the Raft configuration.
//
// A newly elected leader first proposes Tick{ResetSessions} (sessions
// restart, as in Kafka, so brokers are not fenced for heartbeats lost during
// the election), then a Tick whenever State.ExpiredBrokers by its clock is
// not empty. Unless auto.leader.rebalance.enable is off, it also checks the
// leader imbalance every leader.imbalance.check.interval.seconds by its
// clock (the first check one interval after it gained leadership) and
// proposes ElectLeaders{Preferred} for State.ImbalancedPartitions
// (leader.imbalance.per.broker.percentage; rebalance.go): time stays out of
// the FSM, which re-checks each partition when it applies the election.
//
// # Goroutines and locks
//
// hashicorp/raft owns its goroutines (main loop, FSM, snapshots, transport
// readers); Raft's FSM goroutine is the only caller of fsm.Apply/Restore.
// The Controller owns: the driver (Ticks, automatic preferred-leader
// elections, observer join; one proposal at a time), the mux's accept
// loop and one goroutine per accepted connection until it is classified or,
// for the controller RPC, answered; and one short-lived waiter per local
// proposal, which ends when Raft resolves the future (at the latest at
// Shutdown). Close cancels the Controller's context, shuts Raft down,
// closes the transport and mux (closing RPC connections being served),
// waits for its goroutines and closes the log store.
//
// Locks: fsm.mu (RWMutex) guards the State: Apply and Restore write,
// Read/State/Offset/WaitApplied/Snapshot read. watchMu guards the watcher
// set. They are never held together: Apply releases fsm.mu before it
// signals watchers. Read's callback runs under fsm.mu's read lock and must
// not call back into the Controller.
package controller
