package main

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/internal/vfs"
	"github.com/stratalog/strata/remote/objstore"
	"github.com/stratalog/strata/remote/rlm"
	"github.com/stratalog/strata/server"
)

// Tiered storage in `strata serve` (docs/tiered-storage.md): the
// strata.remote.storage.* properties of the config file name the object
// store; with any of them set the broker runs a remote log manager
// (remote/rlm) over it, keeping its metadata in the data directory's
// remoteMetadataDir, and Fetch and ListOffsets read remote data through
// it. Topics turn it on with remote.storage.enable=true.

// remoteMetadataDir is where the remote log manager keeps its metadata,
// under the data directory (the engine leaves that entry alone).
const remoteMetadataDir = engine.RemoteMetadataDirName

// isRemoteKey reports whether a property configures the object store
// (internal/config does not know them: objstore.Open checks them).
func isRemoteKey(k string) bool { return strings.HasPrefix(k, objstore.ConfigPrefix) }

// remotePropsOf picks the object-store properties of a config file.
func remotePropsOf(props map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range props {
		if isRemoteKey(k) {
			out[k] = v
		}
	}
	return out
}

// openRemote opens the object store and the remote log manager when the
// properties name a store (nil, nil when none is configured), with the
// broker's remote.log.* keys, and installs the manager in srv.
func openRemote(cfg config.Broker, props map[string]string, dataDir string, eng *engine.Engine, srv *server.Server, logger *slog.Logger) (*rlm.Manager, error) {
	if len(props) == 0 {
		return nil, nil
	}
	store, err := objstore.Open(props, vfs.OS)
	if err != nil {
		return nil, fmt.Errorf("tiered storage: %w", err)
	}
	m, err := rlm.Open(rlm.Options{
		Engine: eng, Store: store, Dir: filepath.Join(dataDir, remoteMetadataDir), Logger: logger,
		Interval:              time.Duration(cfg.RemoteTaskIntervalMs) * time.Millisecond,
		CopyMaxBytesPerSecond: cfg.RemoteCopyMaxBytesPerSec,
		CacheBytes:            cfg.RemoteReaderCacheBytes,
		MaxCachedSegmentBytes: cfg.RemoteReaderCacheBytes / 4,
	})
	if err != nil {
		return nil, fmt.Errorf("tiered storage: %w", err)
	}
	srv.SetRemoteLog(m)
	kind := props[objstore.KeyType]
	if kind == "" {
		kind = "local"
	}
	logger.Info("tiered storage on", "store", kind, "metadata", filepath.Join(dataDir, remoteMetadataDir))
	return m, nil
}

// closeRemote stops the remote log manager (before the engine closes).
func closeRemote(m *rlm.Manager, srv *server.Server) {
	if m == nil {
		return
	}
	srv.SetRemoteLog(nil)
	m.Close()
}
