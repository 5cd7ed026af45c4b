// Package diskstats reads a block device's counters from /proc/diskstats:
// the load generator's device traffic, and tests that count a device's
// requests and flushes.
package diskstats

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Path is where Linux lists every block device's counters.
const Path = "/proc/diskstats"

// SectorBytes is the unit of /proc/diskstats' sector counts, whatever the
// device's own sector size.
const SectorBytes = 512

// Stats is one device's line of /proc/diskstats (counters since boot).
type Stats struct {
	Reads, ReadSectors   uint64
	Writes, WriteSectors uint64
	IOTicksMs            uint64 // time the device had I/O in flight
	Flushes              uint64
	HasFlushes           bool // the kernel counts flushes (5.5+: 20 columns)
}

// ParseLine parses one line of /proc/diskstats:
//
//	major minor name reads reads_merged sectors_read ms_reading
//	writes writes_merged sectors_written ms_writing in_flight io_ticks_ms weighted_ms
//	[discards discards_merged sectors_discarded ms_discarding]   4.18+
//	[flushes ms_flushing]                                         5.5+
func ParseLine(line []byte) (major, minor uint32, name string, s Stats, err error) {
	f := bytes.Fields(line)
	if len(f) < 14 {
		return 0, 0, "", s, fmt.Errorf("diskstats line has %d fields, want at least 14", len(f))
	}
	var v [20]uint64
	for i, x := range f[:min(len(f), len(v))] {
		if i == 2 {
			continue
		}
		if v[i], err = strconv.ParseUint(string(x), 10, 64); err != nil {
			return 0, 0, "", s, fmt.Errorf("diskstats field %d: %w", i+1, err)
		}
	}
	if v[0] > 1<<32-1 || v[1] > 1<<32-1 {
		return 0, 0, "", s, fmt.Errorf("diskstats device number %d:%d out of range", v[0], v[1])
	}
	s = Stats{Reads: v[3], ReadSectors: v[5], Writes: v[7], WriteSectors: v[9], IOTicksMs: v[12]}
	if len(f) >= 20 {
		s.Flushes, s.HasFlushes = v[18], true
	}
	return uint32(v[0]), uint32(v[1]), string(f[2]), s, nil
}

// Find finds device major:minor in the text of /proc/diskstats.
func Find(text []byte, major, minor uint32) (name string, s Stats, ok bool, err error) {
	for line := range bytes.SplitSeq(text, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ma, mi, n, st, err := ParseLine(line)
		if err != nil {
			return "", s, false, err
		}
		if ma == major && mi == minor {
			return n, st, true, nil
		}
	}
	return "", s, false, nil
}

// Read reads Path and returns device major:minor's counters.
func Read(major, minor uint32) (Stats, error) {
	text, err := os.ReadFile(Path)
	if err != nil {
		return Stats{}, err
	}
	_, s, ok, err := Find(text, major, minor)
	if err == nil && !ok {
		err = fmt.Errorf("device %d:%d is not in %s", major, minor, Path)
	}
	return s, err
}
