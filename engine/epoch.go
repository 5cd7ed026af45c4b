package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/stratalog/strata/internal/vfs"
)

// epochEntry says leader epoch Epoch started at StartOffset.
type epochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache is Kafka's LeaderEpochFileCache without the file: entries
// strictly increasing in epoch and start offset. Guarded by Log.mu.
type epochCache struct {
	entries []epochEntry
}

// assign records that epoch starts at offset, as Kafka does: a no-op if the
// latest entry already has this epoch at an offset <= start; otherwise entries
// with epoch >= epoch or start offset >= start are dropped first. It reports
// whether the cache changed.
func (c *epochCache) assign(epoch int32, start int64) bool {
	if epoch < 0 || start < 0 {
		return false
	}
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if last.Epoch == epoch && last.StartOffset <= start {
			return false
		}
	}
	keep := len(c.entries)
	for keep > 0 && (c.entries[keep-1].Epoch >= epoch || c.entries[keep-1].StartOffset >= start) {
		keep--
	}
	c.entries = append(c.entries[:keep], epochEntry{epoch, start})
	return true
}

// latest returns the newest epoch.
func (c *epochCache) latest() (int32, bool) {
	if len(c.entries) == 0 {
		return -1, false
	}
	return c.entries[len(c.entries)-1].Epoch, true
}

// truncateFromEnd drops entries starting at or after end (log truncated to end).
func (c *epochCache) truncateFromEnd(end int64) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= end {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// truncateFromStart drops entries wholly below start; the newest dropped
// entry is kept with its start moved to start (Kafka's truncateFromStart).
func (c *epochCache) truncateFromStart(start int64) bool {
	i := 0
	for i < len(c.entries) && c.entries[i].StartOffset <= start {
		i++
	}
	if i == 0 {
		return false
	}
	last := c.entries[i-1]
	if i == 1 && last.StartOffset == start {
		return false
	}
	last.StartOffset = start
	rest := append([]epochEntry{last}, c.entries[i:]...)
	c.entries = rest
	return true
}

// endOffsetFor answers OffsetForLeaderEpoch exactly as Kafka's
// LeaderEpochFileCache.endOffsetFor: the largest epoch <= epoch and the start
// offset of the next epoch (or the log end for the latest epoch).
func (c *epochCache) endOffsetFor(epoch int32, logEnd int64) (int32, int64) {
	if epoch < 0 || len(c.entries) == 0 {
		return -1, -1
	}
	if latest, _ := c.latest(); latest == epoch {
		return epoch, logEnd
	}
	// higher = first entry with Epoch > epoch.
	hi := -1
	for i, e := range c.entries {
		if e.Epoch > epoch {
			hi = i
			break
		}
	}
	if hi < 0 {
		return -1, -1
	}
	if hi == 0 {
		return epoch, c.entries[0].StartOffset
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset
}

func (c *epochCache) snapshot() []epochEntry { return append([]epochEntry(nil), c.entries...) }

// saveEpochs persists the leader-epoch cache as the partition's
// leader-epoch-checkpoint, replaced atomically and durably
// (vfs.WriteFileAtomicFS on the engine's file system). Caller holds
// epochMu (or is opening the log).
func (l *Log) saveEpochs() error {
	err := vfs.WriteFileAtomicFS(l.e.fs, filepath.Join(l.dir, epochCheckpoint), formatEpochCheckpoint(l.epochs.entries))
	if err == nil {
		l.epochsDirty = false
	}
	return err
}

// saveDirtyEpochs writes leader-epoch-checkpoint if an append changed the
// cache since it was last written (epochsAssigned). A log deleted
// meanwhile has no directory to write to and no file to keep.
func (l *Log) saveDirtyEpochs() error {
	l.epochMu.Lock()
	var err error
	if l.epochsDirty {
		err = l.saveEpochs()
	}
	l.epochMu.Unlock()
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		l.mu.Lock()
		gone := l.deleted
		l.mu.Unlock()
		if gone {
			return nil
		}
	}
	return fmt.Errorf("writing %s of %s: %w", epochCheckpoint, l, err)
}

// loadEpochs reads leader-epoch-checkpoint; a missing or bad file starts
// empty.
func (l *Log) loadEpochs() {
	data, err := readSmallFileFS(l.e.fs, filepath.Join(l.dir, epochCheckpoint))
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		var entries []epochEntry
		if entries, err = parseEpochCheckpoint(data); err == nil {
			l.epochs.entries = entries
			return
		}
	}
	l.e.logger.Warn("ignoring leader epoch checkpoint", "log", l.String(), "err", err)
}
