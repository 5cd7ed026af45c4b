//go:build race

package index

import "sync/atomic"

// storeWord stores v at p atomically: the race detector would report a
// sequence-lock reader's load of a slot being overwritten after a
// truncation, which the plain store of other builds leaves to the lock.
func storeWord(p *uint32, v uint32) { atomic.StoreUint32(p, v) }
