package engine

import (
	"fmt"

	"github.com/stratalog/strata/internal/vfs"
)

// RestartAtTiered is TruncateFullyAndStartAt(offset) for a follower whose
// leader keeps the data below offset in remote storage only (KIP-405's
// follower path, Kafka's buildRemoteLogAuxState): the restarted log takes
// the leader-epoch cache and the producer state the leader copied with
// the remote segment ending at offset, instead of starting with none.
//
// epochs is that segment's .leader-epoch-checkpoint object (the
// leader-epoch-checkpoint file format); its entries starting at or after
// offset are dropped, and the older ones folded into the epoch holding
// offset (as Open leaves a log's cache); nil: none (the cache starts
// empty). producerSnapshot is its .snapshot object, a
// producer snapshot taken at offset (nil: none copied; the log then starts
// with no producers, as TruncateFullyAndStartAt). Both are checked before
// the log is touched: a bad one fails the call and leaves the log as it
// was. The snapshot is written durably as the log's snapshot at offset, so
// a restart of the broker loads it too.
func (l *Log) RestartAtTiered(offset int64, epochs, producerSnapshot []byte) error {
	var entries []epochEntry
	if epochs != nil {
		var err error
		if entries, err = parseEpochCheckpoint(epochs); err != nil {
			return fmt.Errorf("engine: %s: remote leader-epoch checkpoint: %w", l, err)
		}
	}
	if producerSnapshot != nil {
		at, _, err := decodeProducerSnapshot(producerSnapshot)
		if err != nil {
			return fmt.Errorf("engine: %s: remote producer snapshot: %w", l, err)
		}
		if at != offset {
			return fmt.Errorf("engine: %s: remote producer snapshot taken at %d, restarting at %d", l, at, offset)
		}
	}
	if err := l.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	l.lockIdle()
	defer l.mu.Unlock()
	if l.closed {
		return l.closedErr()
	}
	if l.logStart.Load() != offset || l.logEnd.Load() != offset {
		// Appended or restarted again meanwhile: what we hold no longer
		// describes the log.
		return fmt.Errorf("engine: %s: changed while restarting at %d", l, offset)
	}
	c := epochCache{entries: entries}
	c.truncateFromEnd(offset)
	c.truncateFromStart(offset) // as Open leaves a log's cache: nothing below its start
	l.epochMu.Lock()
	l.epochs.entries = c.entries
	epochErr := l.epochsChanged()
	l.epochMu.Unlock()
	if epochErr != nil {
		return l.e.ioFailure("writing "+epochCheckpoint, epochErr)
	}
	if producerSnapshot == nil {
		return nil
	}
	if err := vfs.WriteFileAtomicFS(l.e.fs, l.snapshotPath(offset), producerSnapshot); err != nil {
		return fmt.Errorf("engine: %s: writing the remote producer snapshot: %w", l, err)
	}
	l.loadProducers() // producers.go: the snapshot at offset is the newest at or below the log end
	return nil
}
