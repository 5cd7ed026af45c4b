package replica

import (
	"context"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Tiered storage's follower path (KIP-405): a leader answers a fetch below
// its local log start OFFSET_MOVED_TO_TIERED_STORAGE (error 109) with that
// start when remote storage holds the data below it. The follower then
// builds its state from the remote-log metadata and objects instead of
// fetching the whole log: Config.TierState (the remote log manager's
// RemoteLogAuxState, through the broker) names the offset to restart at
// (the end of the remote segment holding the offset below the leader's
// local start) with that segment's leader-epoch checkpoint and producer
// snapshot, and the log restarts there holding them
// (engine.Log.RestartAtTiered). The call runs on the fetcher, as Kafka's
// tier state machine runs on its fetcher thread, bounded by
// tierStateTimeout; while it fails (the follower's metadata has not caught
// up, the store is down) the partition backs off and fetches again, which
// brings error 109 and another try.

// TierState is the remote state a follower restarts its log with (see
// Config.TierState): the offset and the raw .leader-epoch-checkpoint and
// .snapshot objects of the remote segment ending there (nil: none).
type TierState struct {
	Offset                   int64
	Epochs, ProducerSnapshot []byte
}

// TierStateFunc finds the remote state for restarting l below the
// leader's local log start leaderLocalStart.
type TierStateFunc func(ctx context.Context, l *engine.Log, leaderLocalStart int64) (TierState, error)

// tierStateTimeout bounds one TierStateFunc call.
const tierStateTimeout = 10 * time.Second

// restartLog empties l and restarts it at the leader's log start at
// (onFetchError's restartAt) after the leader answered code: for error
// 109 with a TierState hook, at the remote state's offset holding its
// epochs and producers; otherwise empty at at. nil with nothing done when
// the remote state is not there yet (the partition backs off).
func (f *fetcher) restartLog(fp *fpart, code int16, at int64) error {
	l := fp.log
	hook := f.m.cfg.TierState
	if code != kerr.OffsetMovedToTieredStorage.Code || hook == nil {
		f.m.log.Info("follower log below the leader's log start; restarting it", "log", l.String(), "logEnd", l.LogEndOffset(), "leaderLogStart", at)
		return l.TruncateFullyAndStartAt(at)
	}
	ctx, cancel := context.WithTimeout(f.m.ctx, tierStateTimeout)
	st, err := hook(ctx, l, at)
	cancel()
	if err != nil {
		f.partitionBackoff(fp, "remote log state", err, false)
		f.m.log.Warn("follower below the leader's local log start: remote state not available yet", "log", l.String(), "leaderLocalLogStart", at, "err", err)
		return nil
	}
	f.m.log.Info("follower log below the leader's local log start; restarting it from remote storage", "log", l.String(),
		"logEnd", l.LogEndOffset(), "leaderLocalLogStart", at, "restartAt", st.Offset, "producerSnapshot", st.ProducerSnapshot != nil)
	return l.RestartAtTiered(st.Offset, st.Epochs, st.ProducerSnapshot)
}
