package coordhost

import (
	"errors"
	"maps"
	"reflect"
	"testing"
)

func TestPlan(t *testing.T) {
	ld := func(p, e int32) Action { return Action{Op: Load, Partition: p, Epoch: e} }
	ul := func(p int32) Action { return Action{Op: Unload, Partition: p} }
	cases := []struct {
		name        string
		loaded, led Leadership
		n           int32
		want        []Action
	}{
		{"nothing", nil, nil, 4, nil},
		{"gain", nil, Leadership{1: 5, 3: 0}, 4, []Action{ld(1, 5), ld(3, 0)}},
		{"steady", Leadership{1: 5}, Leadership{1: 5}, 4, nil},
		{"new epoch reloads", Leadership{1: 5}, Leadership{1: 6}, 4, []Action{ld(1, 6)}},
		{"older epoch reloads too", Leadership{1: 6}, Leadership{1: 5}, 4, []Action{ld(1, 5)}},
		{"lose", Leadership{0: 1, 2: 3}, Leadership{2: 3}, 4, []Action{ul(0)}},
		{"lose all", Leadership{0: 1, 2: 3}, nil, 4, []Action{ul(0), ul(2)}},
		{"mixed, ascending", Leadership{0: 1, 2: 3, 3: 1}, Leadership{1: 2, 2: 4, 3: 1}, 4,
			[]Action{ul(0), ld(1, 2), ld(2, 4)}},
		{"outside [0,n) ignored", Leadership{7: 1}, Leadership{-1: 1, 4: 2, 9: 0}, 4, nil},
		{"no partitions", Leadership{0: 1}, Leadership{0: 2}, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			loaded0, led0 := maps.Clone(c.loaded), maps.Clone(c.led)
			got := Plan(c.loaded, c.led, c.n)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Plan(%v, %v, %d) = %v, want %v", c.loaded, c.led, c.n, got, c.want)
			}
			if !maps.Equal(c.loaded, loaded0) || !maps.Equal(c.led, led0) {
				t.Fatalf("Plan changed its arguments: %v %v", c.loaded, c.led)
			}
		})
	}
}

func TestLeadershipDone(t *testing.T) {
	fail := errors.New("load failed")
	cases := []struct {
		name  string
		start Leadership
		a     Action
		err   error
		want  Leadership
	}{
		{"load ok", Leadership{}, Action{Op: Load, Partition: 2, Epoch: 7}, nil, Leadership{2: 7}},
		{"reload ok", Leadership{2: 6}, Action{Op: Load, Partition: 2, Epoch: 7}, nil, Leadership{2: 7}},
		{"load failed", Leadership{}, Action{Op: Load, Partition: 2, Epoch: 7}, fail, Leadership{}},
		{"reload failed forgets", Leadership{2: 6, 3: 1}, Action{Op: Load, Partition: 2, Epoch: 7}, fail, Leadership{3: 1}},
		{"unload", Leadership{2: 6, 3: 1}, Action{Op: Unload, Partition: 3}, nil, Leadership{2: 6}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.start.Done(c.a, c.err)
			if !maps.Equal(c.start, c.want) {
				t.Fatalf("got %v, want %v", c.start, c.want)
			}
		})
	}
}

// Applying a plan's actions, all successful, makes loaded equal to led
// (within [0,n)), and planning again yields nothing.
func TestPlanConverges(t *testing.T) {
	steps := []Leadership{
		{0: 1, 1: 1},
		{1: 2, 2: 1},
		{},
		{0: 3, 1: 3, 2: 3, 3: 3},
		{3: 4, 5: 9},
	}
	loaded := Leadership{}
	for i, led := range steps {
		for _, a := range Plan(loaded, led, 4) {
			loaded.Done(a, nil)
		}
		want := Leadership{}
		for p, e := range led {
			if p >= 0 && p < 4 {
				want[p] = e
			}
		}
		if !maps.Equal(loaded, want) {
			t.Fatalf("step %d: loaded %v, want %v", i, loaded, want)
		}
		if again := Plan(loaded, led, 4); len(again) != 0 {
			t.Fatalf("step %d: a second plan is %v", i, again)
		}
	}
}
