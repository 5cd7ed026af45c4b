//go:build !race

package index

// storeWord stores v at p with a plain store. Readers load entry words
// atomically, but only below a count the writer stored atomically after
// these stores, or under the sequence lock, which discards what a
// concurrent overwrite let them see (an aligned word is never torn).
func storeWord(p *uint32, v uint32) { *p = v }
