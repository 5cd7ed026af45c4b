//go:build !linux

package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/stratalog/strata/internal/diskstats"
)

func lookupDevice(dir string) (*blockDevice, error) {
	return nil, fmt.Errorf("device counters need Linux's %s: %w", diskstats.Path, errors.ErrUnsupported)
}

func probeDevice(ctx context.Context, dir string, total int64, maxTime time.Duration, logw io.Writer) (*DeviceBaseline, error) {
	return nil, fmt.Errorf("the device probe needs Linux (O_DIRECT, fallocate): %w", errors.ErrUnsupported)
}
