package objstore

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/stratalog/strata/internal/vfs"
)

// Broker property names of the remote store (server.properties style).
// Kafka leaves the store to a plugin's own "rsm.config.*" keys; Strata's
// stores are built in, so their keys live under ConfigPrefix.
const (
	ConfigPrefix = "strata.remote.storage."

	// KeyType is "local" (the default) or "s3".
	KeyType = ConfigPrefix + "type"
	// KeyLocalDir is the local store's root directory (required for
	// "local").
	KeyLocalDir = ConfigPrefix + "local.dir"

	KeyS3Endpoint  = ConfigPrefix + "s3.endpoint"          // http(s)://host:port
	KeyS3Bucket    = ConfigPrefix + "s3.bucket"            // required
	KeyS3Region    = ConfigPrefix + "s3.region"            // default us-east-1
	KeyS3PathStyle = ConfigPrefix + "s3.path.style.access" // true|false, default false
	KeyS3AccessKey = ConfigPrefix + "s3.access.key.id"
	KeyS3SecretKey = ConfigPrefix + "s3.secret.access.key"
	KeyS3Session   = ConfigPrefix + "s3.session.token"
	KeyS3PartSize  = ConfigPrefix + "s3.multipart.part.size" // bytes, default 16777216, min 5242880
)

var knownKeys = map[string]bool{
	KeyType: true, KeyLocalDir: true, KeyS3Endpoint: true, KeyS3Bucket: true, KeyS3Region: true,
	KeyS3PathStyle: true, KeyS3AccessKey: true, KeyS3SecretKey: true, KeyS3Session: true, KeyS3PartSize: true,
}

// Open builds the store the properties describe (keys outside
// ConfigPrefix are ignored; an unknown key inside it is an error, so a
// typo is not silently a default). The local store runs over fsys.
func Open(props map[string]string, fsys vfs.FS) (ObjectStore, error) {
	var unknown []string
	for k := range props {
		if strings.HasPrefix(k, ConfigPrefix) && !knownKeys[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("objstore: unknown properties %s", strings.Join(unknown, ", "))
	}
	switch t := props[KeyType]; t {
	case "", "local":
		dir := props[KeyLocalDir]
		if dir == "" {
			return nil, fmt.Errorf("objstore: %s is required for the local store", KeyLocalDir)
		}
		return OpenLocal(fsys, dir)
	case "s3":
		cfg := S3Config{
			Endpoint:        props[KeyS3Endpoint],
			Bucket:          props[KeyS3Bucket],
			Region:          props[KeyS3Region],
			AccessKeyID:     props[KeyS3AccessKey],
			SecretAccessKey: props[KeyS3SecretKey],
			SessionToken:    props[KeyS3Session],
		}
		if v, ok := props[KeyS3PathStyle]; ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("objstore: %s: %q is not true or false", KeyS3PathStyle, v)
			}
			cfg.PathStyle = b
		}
		if v, ok := props[KeyS3PartSize]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < minPartSize || n > 5<<30 {
				return nil, fmt.Errorf("objstore: %s: %q is not a size from %d to %d bytes", KeyS3PartSize, v, minPartSize, int64(5<<30))
			}
			cfg.PartSize = n
		}
		if (cfg.AccessKeyID == "") != (cfg.SecretAccessKey == "") {
			return nil, fmt.Errorf("objstore: %s and %s go together", KeyS3AccessKey, KeyS3SecretKey)
		}
		return NewS3(cfg)
	default:
		return nil, fmt.Errorf("objstore: %s: %q is not local or s3", KeyType, t)
	}
}
