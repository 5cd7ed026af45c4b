package index_test

import (
	"testing"

	"github.com/stratalog/strata/index"
)

// TestEntryReadsEachEntry: Entry returns every entry as appended, on a
// mapped index and on a heap-backed one (Options.FS), and nothing past the
// entries, after a truncation or once closed.
func TestEntryReadsEachEntry(t *testing.T) {
	const base = 1000
	for _, tc := range []struct {
		name string
		dir  string
		o    index.Options
	}{
		{"mapped", t.TempDir(), index.Options{}},
		{"heap", "/d", index.Options{FS: memDir(t)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := index.OpenOffsetWith(tc.dir+"/0.index", base, 4096, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			tm, err := index.OpenTimeWith(tc.dir+"/0.timeindex", base, 4096, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			for i := int64(0); i < 5; i++ {
				if err := o.Append(base+3*i, 100*i); err != nil {
					t.Fatal(err)
				}
				if err := tm.Append(7000+10*i, base+3*i); err != nil {
					t.Fatal(err)
				}
			}
			o.TruncateTo(base + 12)
			tm.TruncateTo(base + 12)
			for i := range 4 {
				off, pos, ok := o.Entry(i)
				if !ok || off != base+3*int64(i) || pos != 100*int64(i) {
					t.Errorf("offset Entry(%d) = (%d, %d, %v)", i, off, pos, ok)
				}
				ts, toff, ok := tm.Entry(i)
				if !ok || ts != 7000+10*int64(i) || toff != base+3*int64(i) {
					t.Errorf("time Entry(%d) = (%d, %d, %v)", i, ts, toff, ok)
				}
			}
			for _, i := range []int{-1, 4, 5} {
				if _, _, ok := o.Entry(i); ok {
					t.Errorf("offset Entry(%d) found an entry", i)
				}
				if _, _, ok := tm.Entry(i); ok {
					t.Errorf("time Entry(%d) found an entry", i)
				}
			}
			if err := o.Close(); err != nil {
				t.Fatal(err)
			}
			if err := tm.Close(); err != nil {
				t.Fatal(err)
			}
			if _, _, ok := o.Entry(0); ok {
				t.Error("offset Entry(0) on a closed index")
			}
			if _, _, ok := tm.Entry(0); ok {
				t.Error("time Entry(0) on a closed index")
			}
		})
	}
}
