package diskstats

import "testing"

// A 5.5+ kernel's lines have 20 columns (discards 4.18+, flushes 5.5+); a
// kernel before 4.18 has 14.
const sampleDiskstats = `   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
 254       0 vda 13255 4010 705698 5903 1068610 10013 9209624 120335 0 250768 313561 1084181 1091 9185208 187315 11 6
 254       1 vda1 13000 4000 700000 5900 1068000 10000 9200000 120000 0 250000 313000 1084000 1090 9185000 187000 0 0
   8       0 sda 100 5 2048 10 300 7 8192 40 2 1234 50
   8      16 sdb 100 5 2048 10 300 7 8192 40 2 1234 50 0 0 0 0
`

func TestParse(t *testing.T) {
	name, s, ok, err := Find([]byte(sampleDiskstats), 254, 0)
	if err != nil || !ok || name != "vda" {
		t.Fatalf("vda: %q %v %v", name, ok, err)
	}
	want := Stats{Reads: 13255, ReadSectors: 705698, Writes: 1068610, WriteSectors: 9209624, IOTicksMs: 250768, Flushes: 11, HasFlushes: true}
	if s != want {
		t.Fatalf("vda: %+v, want %+v", s, want)
	}
	if name, s, ok, err = Find([]byte(sampleDiskstats), 254, 1); err != nil || !ok || name != "vda1" || s.Writes != 1068000 || !s.HasFlushes || s.Flushes != 0 {
		t.Fatalf("partition vda1: %q %+v %v %v", name, s, ok, err)
	}
	// 14 columns (before 4.18): the 11 classic counters, no flushes.
	name, s, ok, err = Find([]byte(sampleDiskstats), 8, 0)
	if err != nil || !ok || name != "sda" {
		t.Fatalf("sda: %q %v %v", name, ok, err)
	}
	want = Stats{Reads: 100, ReadSectors: 2048, Writes: 300, WriteSectors: 8192, IOTicksMs: 1234}
	if s != want {
		t.Fatalf("14-column line: %+v, want %+v", s, want)
	}
	// 18 columns (4.18 to 5.4): discards, no flushes.
	if _, s, ok, err = Find([]byte(sampleDiskstats), 8, 16); err != nil || !ok || s.HasFlushes || s.Writes != 300 {
		t.Fatalf("18-column line: %+v %v %v", s, ok, err)
	}
	if _, _, ok, err := Find([]byte(sampleDiskstats), 9, 9); ok || err != nil {
		t.Fatalf("absent device: found %v, %v", ok, err)
	}
	if _, _, _, _, err := ParseLine([]byte("8 0 sda 1 2 3 4 5 6 7 8 9 10")); err == nil {
		t.Fatal("13-column line accepted")
	}
	if _, _, _, _, err := ParseLine([]byte("8 0 sda 1 2 3 4 5 6 x 8 9 10 11")); err == nil {
		t.Fatal("non-numeric counter accepted")
	}
}
