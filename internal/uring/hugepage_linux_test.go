package uring

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestMapAnonHugeAligned: a mapping of whole 2 MiB huge pages starts on a
// 2 MiB boundary, the slack mmap took for the alignment is unmapped, the
// memory is usable, and unmapping removes the whole mapping. Other sizes
// are plain page-aligned mappings.
func TestMapAnonHugeAligned(t *testing.T) {
	for _, tc := range []struct{ n, wantCap int }{
		{64 << 10, 64 << 10},
		{2 << 20, 2 << 20},
		{3 << 20, 3 << 20},
		{6 << 20, 6 << 20},
	} {
		b, err := mapAnon(tc.n)
		if err != nil {
			t.Fatal(err)
		}
		addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if len(b) != tc.n || cap(b) != tc.wantCap {
			t.Errorf("mapAnon(%d): len %d cap %d, want %d and %d", tc.n, len(b), cap(b), tc.n, tc.wantCap)
		}
		huge := tc.n%hugePageBytes == 0
		align := uintptr(Alignment)
		if huge {
			align = hugePageBytes
		}
		if addr%align != 0 {
			t.Errorf("mapAnon(%d) at %#x: not aligned to %d", tc.n, addr, align)
		}
		if huge {
			// Exactly [addr, addr+cap) is mapped: the slack before and
			// after went back (a mapping starting below addr or ending
			// past it would be the unreturned slack, unless merged with
			// a neighbour, which MADV_HUGEPAGE's flag prevents).
			lo, hi, ok := mappingOf(t, addr)
			if !ok || lo != addr || hi != addr+uintptr(cap(b)) {
				t.Errorf("mapAnon(%d): mapping [%#x, %#x) (found %v), want [%#x, %#x)", tc.n, lo, hi, ok, addr, addr+uintptr(cap(b)))
			}
		}
		full := b[:cap(b)]
		for i := 0; i < len(full); i += 4096 {
			full[i] = byte(i>>12) | 1
		}
		if !bytes.Equal(full[:1], []byte{1}) {
			t.Errorf("mapAnon(%d): memory not writable", tc.n)
		}
		t.Logf("mapAnon(%d): huge pages %v", tc.n, hugeBacked(b))
		if err := unmapAnon(b); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := mappingOf(t, addr); ok && huge {
			t.Errorf("mapAnon(%d): still mapped after unmapAnon", tc.n)
		}
	}
}

// mappingOf returns the /proc/self/maps range holding addr.
func mappingOf(t *testing.T, addr uintptr) (lo, hi uintptr, ok bool) {
	t.Helper()
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		r, _, _ := strings.Cut(line, " ")
		a, b, found := strings.Cut(r, "-")
		if !found {
			continue
		}
		l, err1 := strconv.ParseUint(a, 16, 64)
		h, err2 := strconv.ParseUint(b, 16, 64)
		if err1 == nil && err2 == nil && uint64(addr) >= l && uint64(addr) < h {
			return uintptr(l), uintptr(h), true
		}
	}
	return 0, 0, false
}
