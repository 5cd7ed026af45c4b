package uring_test

import (
	"github.com/stratalog/strata/internal/uring"
	"github.com/stratalog/strata/segment"
)

// A ring File is a segment.File as it is: the segment can be built on one
// and the appender can submit asynchronous Ops against the same File.
var _ segment.File = (*uring.File)(nil)
