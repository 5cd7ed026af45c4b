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

// TestMapMemoryHugeLater: the mapping is aligned to a huge page, exactly
// its size, resident in full when it returns (faulted in on 4 KiB pages),
// and asks for huge pages afterwards (VmFlags "hg", not "nh"), so that
// khugepaged may collapse it. A mapping of another size is MapMemory's.
func TestMapMemoryHugeLater(t *testing.T) {
	b, err := MapMemoryHugeLater(2 * hugePageBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer UnmapMemory(b)
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if addr%hugePageBytes != 0 || len(b) != 2*hugePageBytes || cap(b) != 2*hugePageBytes {
		t.Fatalf("at %#x, len %d cap %d: want aligned to %d, %d bytes", addr, len(b), cap(b), hugePageBytes, 2*hugePageBytes)
	}
	rss, flags := smapsOf(t, addr)
	if rss != uint64(len(b)) {
		t.Errorf("Rss %d bytes right after the mapping, want %d (faulted in)", rss, len(b))
	}
	_, thpErr := os.Stat("/sys/kernel/mm/transparent_hugepage")
	thp := thpErr == nil // a kernel without THP refuses MADV_HUGEPAGE
	if thp && (!strings.Contains(" "+flags+" ", " hg ") || strings.Contains(" "+flags+" ", " nh ")) {
		t.Errorf("VmFlags %q: want hg (huge pages asked for) and not nh", flags)
	}
	b[0], b[len(b)-1] = 1, 2

	small, err := MapMemoryHugeLater(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(small) != 64<<10 {
		t.Errorf("64 KiB mapping: len %d", len(small))
	}
	small[len(small)-1] = 1
	UnmapMemory(small)
}

// smapsOf returns the Rss (bytes) and VmFlags of the /proc/self/smaps
// mapping starting at addr.
func smapsOf(t *testing.T, addr uintptr) (rss uint64, flags string) {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in, found := false, false
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if r, _, ok := strings.Cut(f[0], "-"); ok && !strings.HasSuffix(f[0], ":") {
			l, err := strconv.ParseUint(r, 16, 64)
			in = err == nil && uintptr(l) == addr
			found = found || in
			continue
		}
		if !in {
			continue
		}
		switch f[0] {
		case "Rss:":
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			rss = kb << 10
		case "VmFlags:":
			flags = strings.Join(f[1:], " ")
		}
	}
	if !found {
		t.Fatalf("no mapping at %#x in /proc/self/smaps", addr)
	}
	return rss, flags
}
