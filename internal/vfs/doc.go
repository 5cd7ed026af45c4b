// Package vfs is where the files the engine and the coordinators write
// (checkpoints, producer-id blocks, meta.properties) are replaced and
// synced: one atomic replace, one directory sync, one sync by path. It is
// the start of the file-system seam (a memory implementation that can
// crash and fail is to follow); today it works on the real file system.
package vfs
