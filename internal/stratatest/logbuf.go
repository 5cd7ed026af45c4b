package stratatest

import (
	"bytes"
	"strings"
	"sync"
)

// LogBuffer is a log sink that the code under test writes to from its own
// goroutines while the test reads it.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Count is how many times s was written (in lines or otherwise).
func (l *LogBuffer) Count(s string) int { return strings.Count(l.String(), s) }
