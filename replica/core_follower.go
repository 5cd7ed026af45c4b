package replica

import (
	"errors"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The follower side's decisions, as pure functions of what the fetcher
// read from its log and the leader's answer; the fetcher (fetcher.go)
// carries them out (truncates, appends, backs off). None does I/O or reads
// a clock.

// truncationOffset is where a follower's log stops agreeing with the
// leader's (KIP-101/KIP-279), from the leader's OffsetForLeaderEpoch answer
// (leaderEpoch, leaderEnd) to the follower's question for its latest epoch
// asked: the follower keeps min(its log end, that offset). end and hw are
// the follower log's end and HW; oursEnd is the follower's own end offset
// of leaderEpoch (-1 when it does not know the epoch). The result is never
// past end: the log truncates when it is below end.
func truncationOffset(end, hw int64, asked, leaderEpoch int32, leaderEnd, oursEnd int64) int64 {
	switch {
	case leaderEpoch < 0 || leaderEnd < 0:
		// The leader knows no epoch <= ours: keep what the HW covers
		// (Kafka's fallback).
		return min(end, hw)
	case leaderEpoch == asked:
		return min(end, leaderEnd)
	default:
		// The leader's largest epoch <= ours is older than ours: our log
		// agrees with it up to our own end of that epoch at most.
		to := min(end, leaderEnd)
		if oursEnd >= 0 {
			to = min(to, oursEnd)
		}
		return to
	}
}

// fetchStep is what the fetcher does with a partition whose fetch the
// leader answered with an error.
type fetchStep struct {
	restartAt  int64 // >= 0: empty the log and restart it at this offset; -1 none
	retruncate bool  // back to truncation (OffsetForLeaderEpoch) before fetching
	backoff    bool  // park the partition (retryAfter)
}

// onFetchError decides what an error code in a fetch response means for
// the partition, given its log end and the leader's log start (-1
// unknown). OFFSET_OUT_OF_RANGE below the leader's log start restarts the
// log there; past the leader's end our view of the epoch is stale
// (truncate again). FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH and
// NOT_LEADER_OR_FOLLOWER mean leadership is moving: truncate again after
// a backoff (the Manager's next BecomeFollower brings the new epoch).
// Anything else backs off and fetches the same offset again.
func onFetchError(code int16, logEnd, leaderLogStart int64) fetchStep {
	switch code {
	case kerr.OffsetOutOfRange.Code, kerr.OffsetMovedToTieredStorage.Code:
		// OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405): the offset is only in
		// remote storage; the leader answers its local log start, where
		// the follower restarts (the tiered part stays remote).
		if leaderLogStart >= 0 && logEnd < leaderLogStart {
			return fetchStep{restartAt: leaderLogStart}
		}
		return fetchStep{restartAt: -1, retruncate: true}
	case kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code, kerr.NotLeaderForPartition.Code:
		return fetchStep{restartAt: -1, retruncate: true, backoff: true}
	default:
		return fetchStep{restartAt: -1, backoff: true}
	}
}

// straddles reports Kafka's UnexpectedAppendOffset case: an empty log
// (start == end, e.g. just restarted at the leader's log start) fetched a
// first batch [base, last] that begins below its end because the leader's
// log start falls inside that batch (DeleteRecords). The log restarts at
// base and takes the batch.
func straddles(base, last, logStart, logEnd int64) bool {
	return logStart == logEnd && base < logEnd && last >= logEnd
}

// appendVerdict classifies the outcome of appending fetched batches.
type appendVerdict int8

const (
	appendOK         appendVerdict = iota
	appendResync                   // our log end moved (a concurrent truncation): truncate again
	appendBadBatches               // batches the log refuses (corrupt, invalid): back off, fetch again
	appendNoResource               // out of descriptors, memory or space: back off, fetch again
	appendFailed                   // the engine is offline or the log closed: this partition backs off
)

func onAppendError(err error) appendVerdict {
	switch {
	case err == nil:
		return appendOK
	case errors.Is(err, engine.ErrOffsetOutOfRange):
		return appendResync
	case errors.Is(err, engine.ErrCorruptMessage) || errors.Is(err, engine.ErrInvalidRecord):
		return appendBadBatches
	case errors.Is(err, engine.ErrResource):
		return appendNoResource
	default:
		return appendFailed
	}
}

// followLogStart is where the follower's log start moves when the leader's
// did (retention, DeleteRecords): as far as the follower's HW allows
// (Kafka's maybeIncrementLogStartOffset); ok false when it stays.
func followLogStart(leaderStart, hw, ourStart int64) (start int64, ok bool) {
	start = min(leaderStart, hw)
	return start, start > ourStart
}

// refetched reports that a damaged log has re-fetched up to the leader's
// HW: it is eligible to lead again.
func refetched(damaged bool, logEnd, leaderHW int64) bool {
	return damaged && logEnd >= leaderHW
}

// fetchPlan is whether a partition goes into the next Fetch at now.
type fetchPlan struct {
	send     bool          // fetch it at its log end
	wait     time.Duration // > 0: parked this long (backoff)
	flushing bool          // its last append is not durable yet: no fetch until it is
}

// planFetch decides, at now, for a partition in a fetcher: a truncating
// partition waits for the truncation phase, a parked one for its backoff,
// one with appended data not yet durable for its flush (its fetch offset
// must be a durable offset); the others fetch.
func planFetch(truncating bool, backoffUntil, now time.Time, end, durable int64) fetchPlan {
	if d := backoffUntil.Sub(now); d > 0 {
		return fetchPlan{wait: d}
	}
	if truncating {
		return fetchPlan{}
	}
	if durable < end {
		return fetchPlan{flushing: true}
	}
	return fetchPlan{send: true}
}

// leaderBehind reports that an error code from the leader may only mean
// that the leader has not applied the metadata this follower acts on yet:
// a topic created (UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION) or a
// leader epoch begun (NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH) that
// reached this broker first. Brokers apply the controller's records tens of
// milliseconds apart, so the leader knows soon. FENCED_LEADER_EPOCH is not
// one: it means this follower is the one behind, and the Manager's next
// BecomeFollower resets the partition.
func leaderBehind(code int16) bool {
	switch code {
	case kerr.UnknownTopicID.Code, kerr.UnknownTopicOrPartition.Code,
		kerr.NotLeaderForPartition.Code, kerr.UnknownLeaderEpoch.Code:
		return true
	}
	return false
}

// The waits after leaderBehind errors: the first, and the longest they grow
// to (never longer than replica.fetch.backoff.ms).
const (
	leaderBehindFirstRetry = 10 * time.Millisecond
	leaderBehindMaxRetry   = 50 * time.Millisecond
)

// retryAfter is how long a partition waits after an error, given the wait
// after its previous error in a row (0 for none) and replica.fetch.backoff.ms
// (base). An error that may only mean the leader is behind (leaderBehind)
// waits leaderBehindFirstRetry, doubling up to leaderBehindMaxRetry: a new
// topic's or a new leader epoch's first fetches answered so are retried
// within 50 ms of the leader catching up, not after a full backoff during
// which every acks=all produce to the partition waits (a fresh three-broker
// cluster's first second, before). The metadata lag ends on its own (or the
// Manager stops or moves the partition), and one Fetch per source broker
// every 50 ms is cheap while it lasts. Any other error waits base.
func retryAfter(prev time.Duration, behind bool, base time.Duration) time.Duration {
	if !behind {
		return base
	}
	ceil := min(leaderBehindMaxRetry, base)
	if prev <= 0 {
		return min(leaderBehindFirstRetry, ceil)
	}
	return min(2*prev, ceil)
}

// nextBackoff is the fetcher's connection backoff after another failure:
// replica.fetch.backoff.ms, doubling up to 8x.
func nextBackoff(cur, base time.Duration) time.Duration {
	if cur == 0 {
		return base
	}
	return min(2*cur, 8*base)
}
