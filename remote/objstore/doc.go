// Package objstore is the object-store layer of tiered storage (issue
// 23): where the remote log manager puts rolled segments and their
// indexes, and reads them back.
//
// # Files
//
//   - objstore.go: the ObjectStore interface (Put with a checksum the
//     content must match, Get verified at its end, GetRange, Head, an
//     idempotent Delete, a paginated List), Info and Page, the error
//     classification (*Error with Kind Transient / Permanent / NotFound;
//     errors.Is with ErrNotFound, ErrChecksumMismatch, ErrInvalidKey,
//     ErrInvalidRange; IsTransient tells the caller to back off and
//     retry), key rules (ValidKey), and the verifying readers.
//   - local.go: Local, the local-directory store and the default (a single
//     broker tiers with no other service). One file per object with a
//     64-byte header (magic, size, checksum); puts go through a temporary
//     file, fsync, rename and directory fsync over an internal/vfs FS, so
//     they are all or nothing across a crash and run over vfs.MemFS in
//     tests.
//   - s3.go: S3, the S3 API through minio-go (endpoint, bucket, region,
//     path-style addressing, static credentials; multipart above the part
//     size, aborted on failure; the CRC-32C kept as x-amz-meta-strata-crc32c,
//     an older object's SHA-256 read from x-amz-meta-strata-sha256;
//     the client's own retries off, errors classified for the caller).
//   - config.go: the broker properties (strata.remote.storage.type,
//     .local.dir, .s3.endpoint, .s3.bucket, .s3.region,
//     .s3.path.style.access, .s3.access.key.id, .s3.secret.access.key,
//     .s3.session.token, .s3.multipart.part.size) and Open, which builds
//     the store they name; an unknown key under the prefix is refused.
//
// Tests: conformance_test.go is one suite (put/get/head, empty objects
// and overwrites, ranges, NotFound, idempotent delete, pagination in byte
// order, corrupt/short/long uploads refused leaving the old object,
// invalid keys, cancelled contexts, concurrent puts of one key, a
// multipart-sized object) run against the local store on the OS file
// system and on vfs.MemFS (local_test.go, with power cuts at every
// operation of a put and on-disk corruption detected by Get) and against
// a real S3-compatible server on 127.0.0.1 (s3_test.go, with the server
// started by package weedtest, which remote/rlm's tests use too: SeaweedFS's
// `weed server -s3`, module github.com/seaweedfs/seaweedfs at
// v0.0.0-20261109003541-7506e5f91cd6, which ./scripts/test builds into
// $(go env GOPATH)/bin; the test fails, saying so, when weed is missing),
// where it also checks that wrong credentials are Permanent and that the
// store killed mid-run gives Transient errors. s3_fake_test.go runs the S3
// store against fake servers: the request shapes (path style, SigV4 with
// the static key and region, the sum as metadata, Range, ListObjectsV2
// paging), a corrupt upload cut before the server has it, a server that is
// down or never answers giving a Transient error within the ctx deadline,
// and errors classified from status and code (5xx, 429 and 503 SlowDown
// Transient; 403 and NoSuchBucket Permanent; NoSuchKey NotFound).
// config_test.go covers the properties.
//
// Known limits: a HEAD has no error body, so Head on a missing bucket says
// NotFound; when a multipart upload fails after it started, minio-go sends
// the abort detached from ctx (bounded by its own minute), so such a Put
// can outlive its ctx by that abort's round trip; the local store keeps
// keys as paths, so it refuses (Permanent) a key that is a path prefix of
// another ("a" beside "a/b"), which S3 allows, and its List walks the
// directory holding the prefix on every page.
//
// # Integrity
//
// The caller computes the content's checksum before Put, or has PutSum
// compute it while the content is stored (the remote log manager reads a
// rolled segment once and records the sum in the remote log metadata).
// New objects carry a CRC-32C; objects stored with a SHA-256 (before
// 2026-12-05) keep it, and reads verify each by its own algorithm (Sum). Put streams the content through a reader that holds back
// the last bytes until the sum and size match, so a mismatch cuts the
// upload before any object is committed (S3: the PUT body fails or the
// multipart upload is aborted; local: the temporary file is removed). A
// full Get fails with ErrChecksumMismatch at its end when the bytes do not
// match the stored sum; ranges are not verified (the segment formats carry
// their own CRCs).
//
// # Above this
//
// The remote log manager, remote/rlm, copies rolled segments here, keeps
// the remote-log metadata and reads tiered data back for the broker;
// docs/tiered-storage.md describes tiered storage as a whole and what of
// issue 23 is still to come.
package objstore
