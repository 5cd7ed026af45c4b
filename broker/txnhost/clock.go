package txnhost

import (
	"time"

	"github.com/stratalog/strata/broker/coordhost"
)

// Clock is the package's only source of time: the host's ticks (as
// coordhost's), the backoffs between retries, and the times handed to the
// coordinator.
type Clock interface {
	coordhost.Clock
	// After returns a channel that receives once, d from now, and a
	// function that stops it (as time.NewTimer and Timer.Stop do).
	After(d time.Duration) (c <-chan time.Time, stop func() bool)
}
