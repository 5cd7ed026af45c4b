package engine

import (
	"fmt"
	"github.com/stratalog/strata/internal/vfs"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	maxTopicNameLen = 249
	// maxPartitions bounds a topic's partition count (each is a directory
	// with open files and mapped indexes).
	maxPartitions = 1 << 16

	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	deletedSuffix   = ".deleted"
	tmpSuffix       = vfs.TmpSuffix
	deleteDirSuffix = "-delete"
	strayDirSuffix  = "-stray"
	segmentNameLen  = 20
)

// validateTopicName applies Kafka's rules: 1..249 characters from
// [a-zA-Z0-9._-], and not "." or "..".
func validateTopicName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidTopic)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: %q is not allowed", ErrInvalidTopic, name)
	}
	if len(name) > maxTopicNameLen {
		return fmt.Errorf("%w: name longer than %d characters", ErrInvalidTopic, maxTopicNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q contains illegal character %q", ErrInvalidTopic, name, c)
		}
	}
	return nil
}

// collisionName maps '.' to '_' as Kafka does to detect topics whose metric
// names would collide ("a.b" vs "a_b").
func collisionName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// partitionDirName is "<topic>-<partition>".
func partitionDirName(topic string, p int32) string {
	return topic + "-" + strconv.FormatInt(int64(p), 10)
}

// parsePartitionDirName splits "<topic>-<partition>"; ok is false for any
// other shape (including "-delete" and "-stray" directories).
func parsePartitionDirName(name string) (topic string, p int32, ok bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != name[i+1:] {
		return "", 0, false
	}
	if validateTopicName(name[:i]) != nil {
		return "", 0, false
	}
	return name[:i], int32(n), true
}

// segmentFileName is the 20-digit base offset followed by suffix.
func segmentFileName(dir string, base int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d", base)+suffix)
}

// parseSegmentFileName returns the base offset of a "<20 digits><suffix>" name.
func parseSegmentFileName(name, suffix string) (int64, bool) {
	if !strings.HasSuffix(name, suffix) || len(name) != segmentNameLen+len(suffix) {
		return 0, false
	}
	digits := name[:segmentNameLen]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}
