package objstore

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratalog/strata/internal/vfs"
)

func TestOpenFromProperties(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "remote")
	s, err := Open(map[string]string{KeyLocalDir: dir, "log.dirs": "/ignored"}, vfs.OS)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := s.(*Local); !ok || l.root != dir {
		t.Fatalf("default store: %T %+v", s, s)
	}
	s, err = Open(map[string]string{
		KeyType: "s3", KeyS3Endpoint: "http://127.0.0.1:9", KeyS3Bucket: "b", KeyS3Region: "r1",
		KeyS3PathStyle: "true", KeyS3AccessKey: "a", KeyS3SecretKey: "s", KeyS3PartSize: "6291456",
	}, vfs.OS)
	if err != nil {
		t.Fatal(err)
	}
	if s3, ok := s.(*S3); !ok || s3.bucket != "b" || s3.partSize != 6<<20 {
		t.Fatalf("s3 store: %T %+v", s, s)
	}
	for _, c := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{}, KeyLocalDir},
		{map[string]string{KeyType: "gcs"}, "not local or s3"},
		{map[string]string{KeyLocalDir: dir, ConfigPrefix + "s3.bucket.name": "x"}, "unknown properties"},
		{map[string]string{KeyType: "s3", KeyS3Endpoint: "http://h:1"}, "bucket is required"},
		{map[string]string{KeyType: "s3", KeyS3Bucket: "b"}, "endpoint is required"},
		{map[string]string{KeyType: "s3", KeyS3Bucket: "b", KeyS3Endpoint: "ftp://h"}, "scheme"},
		{map[string]string{KeyType: "s3", KeyS3Bucket: "b", KeyS3Endpoint: "http://h", KeyS3PathStyle: "yes"}, KeyS3PathStyle},
		{map[string]string{KeyType: "s3", KeyS3Bucket: "b", KeyS3Endpoint: "http://h", KeyS3PartSize: "1024"}, KeyS3PartSize},
		{map[string]string{KeyType: "s3", KeyS3Bucket: "b", KeyS3Endpoint: "http://h", KeyS3AccessKey: "a"}, "go together"},
	} {
		_, err := Open(c.props, vfs.OS)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%v): %v, want an error with %q", c.props, err, c.want)
		}
	}
}
