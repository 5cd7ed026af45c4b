//go:build !linux

package loadgen

import (
	"context"
	"errors"
	"fmt"
)

// RunLayoutProbe needs Linux (O_DIRECT, fallocate, syncfs, /proc/diskstats).
func RunLayoutProbe(ctx context.Context, cfg LayoutProbeConfig) ([]LayoutResult, error) {
	return nil, fmt.Errorf("the layout probe needs Linux: %w", errors.ErrUnsupported)
}
