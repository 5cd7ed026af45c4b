package loadgen

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// clientCPU is this process's user+system CPU time (getrusage RUSAGE_SELF):
// producers, consumers and the sampler together.
func clientCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat CPU times. It is 100
// on every Linux architecture Go supports (sysconf(_SC_CLK_TCK) would need
// cgo to ask).
const clockTicks = 100

// procStats reads a process's CPU time (utime+stime from /proc/<pid>/stat)
// and its resident and peak resident set sizes (VmRSS, VmHWM from
// /proc/<pid>/status).
func procStats(pid int) (cpu time.Duration, rss, peak int64, err error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	if cpu, err = parseProcStatCPU(stat); err != nil {
		return 0, 0, 0, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	rss = parseStatusKB(status, "VmRSS:") * 1024
	peak = parseStatusKB(status, "VmHWM:") * 1024
	return cpu, rss, peak, nil
}

// parseProcStatCPU extracts utime (field 14) and stime (field 15). The
// command name (field 2) is in parentheses and may hold spaces or ')', so
// fields are counted from the last ')'.
func parseProcStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("loadgen: malformed /proc stat")
	}
	fields := bytes.Fields(stat[i+1:])
	// fields[0] is field 3 (state); utime is field 14 → index 11.
	if len(fields) < 13 {
		return 0, fmt.Errorf("loadgen: short /proc stat")
	}
	utime, err1 := strconv.ParseInt(string(fields[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(fields[12]), 10, 64)
	if err1 != nil || err2 != nil || utime < 0 || stime < 0 {
		return 0, fmt.Errorf("loadgen: malformed /proc stat times")
	}
	return time.Duration(utime+stime) * (time.Second / clockTicks), nil
}

// parseStatusKB returns the kB value of a "Key:   123 kB" line, 0 if absent.
func parseStatusKB(status []byte, key string) int64 {
	for line := range bytes.SplitSeq(status, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte(key)); ok {
			f := bytes.Fields(rest)
			if len(f) > 0 {
				n, err := strconv.ParseInt(string(f[0]), 10, 64)
				if err == nil && n >= 0 {
					return n
				}
			}
		}
	}
	return 0
}
