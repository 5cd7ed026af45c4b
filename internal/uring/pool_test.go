package uring

import (
	"errors"
	"testing"
	"unsafe"
)

func TestPoolChunks(t *testing.T) {
	p, err := NewPool(2*Alignment, 4)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uintptr]bool{}
	var got [][]byte
	for range 4 {
		b, ok := p.TryGet()
		if !ok {
			t.Fatal("TryGet failed with chunks free")
		}
		addr := uintptr(unsafe.Pointer(&b[0]))
		if addr%Alignment != 0 || len(b) != 2*Alignment || cap(b) != 2*Alignment || seen[addr] {
			t.Fatalf("chunk at %#x len %d cap %d (seen %v): want distinct, %d-aligned, len=cap=%d", addr, len(b), cap(b), seen[addr], Alignment, 2*Alignment)
		}
		seen[addr] = true
		for i := range b { // every byte writable
			b[i] = 0xAB
		}
		got = append(got, b)
	}
	if _, ok := p.TryGet(); ok || p.Free() != 0 {
		t.Fatalf("TryGet on an exhausted pool succeeded (free %d)", p.Free())
	}
	if err := p.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Close with chunks out: %v, want ErrBusy", err)
	}
	p.Put(got[1][100:200]) // a reslice returns its chunk
	if b := p.Get(); &b[0] != &got[1][0] {
		t.Fatal("Get did not return the chunk just put back")
	}
	for _, b := range got {
		p.Put(b)
	}
	if p.Free() != p.Chunks() {
		t.Fatalf("free %d of %d", p.Free(), p.Chunks())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

func TestPoolMisuse(t *testing.T) {
	p, err := NewPool(Alignment, 2)
	if err != nil {
		t.Fatal(err)
	}
	b := p.Get()
	p.Put(b)
	for name, f := range map[string]func(){
		"double put":  func() { p.Put(b) },
		"foreign put": func() { p.Put(make([]byte, Alignment)) },
		"nil put":     func() { p.Put(nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
	for _, args := range [][2]int{{0, 1}, {100, 1}, {Alignment, 0}, {Alignment, -1}, {1 << 20, 1025}} {
		if _, err := NewPool(args[0], args[1]); err == nil {
			t.Errorf("NewPool(%d, %d) succeeded", args[0], args[1])
		}
	}
}
