package coordhost

// Leadership maps partitions of the internal topic to leader epochs: the
// partitions this node leads (View.Led), or those it coordinates and the
// epoch each was loaded at (the host's own record).
type Leadership map[int32]int32

// Op is what an Action does to a partition.
type Op int8

const (
	// Load replays the partition and coordinates it at Action.Epoch.
	Load Op = iota + 1
	// Unload stops coordinating the partition.
	Unload
)

func (o Op) String() string {
	switch o {
	case Load:
		return "load"
	case Unload:
		return "unload"
	}
	return "op?"
}

// Action is one step Plan decides.
type Action struct {
	Op        Op
	Partition int32
	Epoch     int32 // Load: the leader epoch to coordinate at
}

// Plan returns what takes loaded to led for partitions 0..n-1, in
// ascending partition order: Load a partition that is led and not loaded,
// or loaded at another leader epoch (a new epoch is a new coordinator
// generation, so the partition is replayed again); Unload one that is
// loaded and no longer led. Partitions outside [0, n) are ignored in both
// maps. Plan does not change its arguments.
func Plan(loaded, led Leadership, n int32) []Action {
	var out []Action
	for p := int32(0); p < n; p++ {
		epoch, lead := led[p]
		prev, was := loaded[p]
		switch {
		case lead && (!was || prev != epoch):
			out = append(out, Action{Op: Load, Partition: p, Epoch: epoch})
		case !lead && was:
			out = append(out, Action{Op: Unload, Partition: p})
		}
	}
	return out
}

// Done records a's outcome in l: a successful Load is coordinated at its
// epoch; a failed Load is forgotten, so the next Plan loads it again while
// the partition is still led (a failed reload is not unloaded: the load
// callback leaves the partition as its failure left it); an Unload is
// forgotten.
func (l Leadership) Done(a Action, err error) {
	switch {
	case a.Op == Load && err == nil:
		l[a.Partition] = a.Epoch
	default:
		delete(l, a.Partition)
	}
}
