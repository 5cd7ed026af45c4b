package engine

import (
	"runtime"
	"testing"
	"unsafe"
)

// The blocks of one slab are distinct, block-sized and capped pieces of one
// aligned mapping (on Linux; elsewhere heap memory), handed out lowest
// address first; a new slab is mapped only when the last one's blocks are
// all out.
func TestSlabsHandOutBlocks(t *testing.T) {
	type owner struct{ s slabs }
	o := &owner{}
	o.s = newSlabs(o, tailBufBytes)
	per := slabBytes / tailBufBytes
	seen := map[uintptr]bool{}
	var first uintptr
	for i := range 2 * per {
		b := o.s.take()
		if len(b) != tailBufBytes || cap(b) != tailBufBytes {
			t.Fatalf("block %d: len %d cap %d, want %d", i, len(b), cap(b), tailBufBytes)
		}
		a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if seen[a] {
			t.Fatalf("block %d at %#x handed out twice", i, a)
		}
		seen[a] = true
		switch {
		case i%per == 0:
			first = a
			if runtime.GOOS == "linux" && a%slabBytes != 0 {
				t.Fatalf("slab %d starts at %#x, not on a %d-byte boundary", i/per, a, slabBytes)
			}
		case a != first+uintptr(i%per*tailBufBytes):
			t.Fatalf("block %d at %#x, want %#x (its slab's blocks in order)", i, a, first+uintptr(i%per*tailBufBytes))
		}
		b[0], b[len(b)-1] = 1, 2 // writable end to end
		if want := i/per + 1; runtime.GOOS == "linux" && o.s.maps.mapped() != want {
			t.Fatalf("after block %d: %d slabs mapped, want %d", i, o.s.maps.mapped(), want)
		}
	}
	runtime.KeepAlive(o)
}

// mapped is how many mappings m holds (tests only).
func (m *slabMaps) mapped() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
