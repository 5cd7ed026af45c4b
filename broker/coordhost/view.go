package coordhost

import "time"

// View is one immutable snapshot of the cluster as this node sees it (the
// server's cluster view implements it). A View must not change after it
// is handed out; Changed tells when a newer one replaces it.
type View interface {
	// Led returns the partitions of topic that this node leads in the
	// snapshot and whose log it holds (the incarnation the snapshot
	// names, not an older topic of the same name), with their leader
	// epochs. Nil or empty: none.
	Led(topic string) Leadership
	// Partitions returns the partition count of topic; exists is false
	// when the snapshot has no topic of that name.
	Partitions(topic string) (n int32, exists bool)
	// Leader returns the leader of partition p of topic (asked only for
	// a topic that exists and 0 <= p < its partition count).
	Leader(topic string, p int32) int32
	// LiveBrokers counts the registered brokers that are not fenced.
	LiveBrokers() int
	// Changed is closed when a newer snapshot replaces this one.
	Changed() <-chan struct{}
}

// Source hands out the current View: nil until this node has one.
type Source interface {
	View() View
}

// Creator proposes the internal topic to the cluster. CreateTopic returns
// at once; the work runs on a goroutine the implementation owns and ends
// by calling done exactly once, from any goroutine, with nil when the
// topic exists (created now or already there) and is in this node's view,
// or with why it does not.
type Creator interface {
	CreateTopic(spec Spec, done func(error))
}

// Clock is the host's only source of time: the wakeups of its loops and
// the time handed to Every's callback.
type Clock interface {
	Now() time.Time
	// Tick returns a channel that receives every d and a function that
	// stops it (as time.NewTicker and Ticker.Stop do).
	Tick(d time.Duration) (c <-chan time.Time, stop func())
}
