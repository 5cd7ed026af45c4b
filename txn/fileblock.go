package txn

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/stratalog/strata/internal/vfs"
)

// BlockFileName is FileBlockSource's file in the data directory. The
// engine's Open leaves a file of this name alone (engine.ProducerIDBlockFile:
// the two names must stay equal, TestBlockFileNameIsTheEngines).
const BlockFileName = "producer-id-block"

// maxBlockFileBytes bounds what is read of the file.
const maxBlockFileBytes = 4096

// NodeRangeBits is the size of each node's share of the producer id space
// with FileBlockSource: node n hands out ids in [n<<NodeRangeBits,
// (n+1)<<NodeRangeBits), 2^47 ids, so brokers of one cluster never collide
// even without the controller. MaxFileNodeID is the largest node id that
// fits.
const (
	NodeRangeBits = 47
	MaxFileNodeID = math.MaxInt64>>NodeRangeBits - 1
)

// FileBlockSource allocates producer id blocks from a file in a broker's
// data directory (layout in the package doc), from the node's own range.
type FileBlockSource struct {
	fs         vfs.FS
	path       string
	start, end int64 // the node's range [start, end)

	mu     sync.Mutex
	loaded bool
	next   int64
}

// NewFileBlockSource returns a source keeping its state in
// dir/BlockFileName on the OS file system and handing out ids from
// nodeID's range (an error if nodeID is outside [0, MaxFileNodeID]).
// Nothing is read until the first block is allocated.
func NewFileBlockSource(dir string, nodeID int32) (*FileBlockSource, error) {
	return NewFileBlockSourceFS(vfs.OS, dir, nodeID)
}

// NewFileBlockSourceFS is NewFileBlockSource on the file system fsys.
func NewFileBlockSourceFS(fsys vfs.FS, dir string, nodeID int32) (*FileBlockSource, error) {
	if nodeID < 0 || int64(nodeID) > MaxFileNodeID {
		return nil, fmt.Errorf("txn: node id %d outside [0, %d]: producer ids need a controller-backed block source", nodeID, MaxFileNodeID)
	}
	start := int64(nodeID) << NodeRangeBits
	return &FileBlockSource{fs: fsys, path: filepath.Join(dir, BlockFileName), start: start, end: start + 1<<NodeRangeBits}, nil
}

// AllocateBlock returns the next BlockSize ids once their end is durable.
func (s *FileBlockSource) AllocateBlock(ctx context.Context) (Block, error) {
	if err := ctx.Err(); err != nil {
		return Block{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.loaded {
		next, err := readBlockFile(s.fs, s.path)
		if err != nil {
			return Block{}, err
		}
		// A file from another node id (the broker was renumbered) or from
		// before ranges: continue in this node's range, never below what
		// the file says was handed out if that is inside it.
		s.next, s.loaded = max(next, s.start), true
	}
	if s.next < s.start || s.next > s.end-BlockSize {
		return Block{}, ErrIDsExhausted
	}
	b := Block{First: s.next, Size: BlockSize}
	if err := vfs.WriteFileAtomicFS(s.fs, s.path, formatBlockFile(b.First+b.Size)); err != nil {
		return Block{}, fmt.Errorf("txn: persisting producer id block: %w", err)
	}
	s.next = b.First + b.Size
	return b, nil
}

func formatBlockFile(next int64) []byte {
	return []byte("version: 1\nnext_producer_id: " + strconv.FormatInt(next, 10) + "\n")
}

// readBlockFile returns next_producer_id; 0 if the file does not exist.
func readBlockFile(fsys vfs.FS, path string) (int64, error) {
	b, err := vfs.ReadFileLimit(fsys, path, maxBlockFileBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case errors.Is(err, vfs.ErrTooLarge):
		return 0, fmt.Errorf("txn: %s: %w: longer than %d bytes", path, errBlockFile, maxBlockFileBytes)
	case err != nil:
		return 0, fmt.Errorf("txn: reading %s: %w", path, err)
	}
	next, err := parseBlockFile(b)
	if err != nil {
		return 0, fmt.Errorf("txn: %s: %w", path, err)
	}
	return next, nil
}

var errBlockFile = errors.New("malformed producer id block file")

// parseBlockFile parses the file exactly as formatBlockFile writes it.
func parseBlockFile(b []byte) (int64, error) {
	if len(b) > maxBlockFileBytes {
		return 0, fmt.Errorf("%w: longer than %d bytes", errBlockFile, maxBlockFileBytes)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) != 3 || lines[2] != "" || lines[0] != "version: 1" {
		return 0, fmt.Errorf("%w: %q", errBlockFile, b)
	}
	v, ok := strings.CutPrefix(lines[1], "next_producer_id: ")
	if !ok {
		return 0, fmt.Errorf("%w: %q", errBlockFile, lines[1])
	}
	next, err := strconv.ParseInt(v, 10, 64)
	if err != nil || next < 0 || strconv.FormatInt(next, 10) != v {
		return 0, fmt.Errorf("%w: next_producer_id %q", errBlockFile, v)
	}
	return next, nil
}
