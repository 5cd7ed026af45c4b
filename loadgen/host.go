package loadgen

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Host is the machine a run was measured on (the JSON's "host"): the load
// generator's, and the spawned brokers' when --spawn (they share it).
// Figures the machine does not offer (no /proc) are left out.
type Host struct {
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	CPUs        int    `json:"cpus"`                   // runtime.NumCPU: the CPUs this process may use
	MemoryBytes int64  `json:"memory_bytes,omitempty"` // MemTotal of /proc/meminfo
	Kernel      string `json:"kernel,omitempty"`       // /proc/sys/kernel/osrelease
	// DataDir and DataDirFS are the spawned brokers' data directory and its
	// filesystem type (from /proc/self/mountinfo); empty against external
	// brokers.
	DataDir   string `json:"data_dir,omitempty"`
	DataDirFS string `json:"data_dir_fs,omitempty"`
}

// Files the host facts come from (variables for tests).
var (
	meminfoPath   = "/proc/meminfo"
	osreleasePath = "/proc/sys/kernel/osrelease"
	mountinfoPath = "/proc/self/mountinfo"
)

// hostFacts describes this machine; dataDir is the spawned brokers' data
// directory or "".
func hostFacts(dataDir string) Host {
	h := Host{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile(meminfoPath); err == nil {
		h.MemoryBytes = memTotal(string(b))
	}
	if b, err := os.ReadFile(osreleasePath); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	if dataDir != "" {
		h.DataDir = dataDir
		if real, err := filepath.EvalSymlinks(dataDir); err == nil {
			dataDir = real
		}
		if b, err := os.ReadFile(mountinfoPath); err == nil {
			h.DataDirFS = mountFSType(string(b), dataDir)
		}
	}
	return h
}

// memTotal is /proc/meminfo's MemTotal in bytes (0 when absent).
func memTotal(meminfo string) int64 {
	for _, line := range strings.Split(meminfo, "\n") {
		rest, ok := strings.CutPrefix(line, "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0
		}
		if len(f) > 1 && f[1] == "kB" {
			n *= 1024
		}
		return n
	}
	return 0
}

// mountFSType is the filesystem type of the mount that holds path (an
// absolute path without symlinks): the longest mount point of mountinfo
// (proc(5): "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root
// rw") that is path or one of its parents; "" when none is.
func mountFSType(mountinfo, path string) string {
	best, bestLen := "", -1
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 1 {
			continue
		}
		mp := unescapeMount(f[4])
		if !underMount(path, mp) || len(mp) < bestLen {
			continue
		}
		best, bestLen = g[0], len(mp) // later mounts over the same point win
	}
	return best
}

func underMount(path, mp string) bool {
	if mp == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == mp || strings.HasPrefix(path, mp+"/")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// describe is the host in one line for the HTML report.
func (h Host) describe() string {
	parts := []string{fmt.Sprintf("%d CPUs", h.CPUs)}
	if h.MemoryBytes > 0 {
		parts = append(parts, fmt.Sprintf("%.1f GiB memory", float64(h.MemoryBytes)/(1<<30)))
	}
	k := h.OS + "/" + h.Arch
	if h.Kernel != "" {
		k += ", kernel " + h.Kernel
	}
	parts = append(parts, k)
	if h.DataDir != "" {
		fs := h.DataDirFS
		if fs == "" {
			fs = "unknown filesystem"
		}
		parts = append(parts, fmt.Sprintf("data directory %s (%s)", h.DataDir, fs))
	}
	return strings.Join(parts, ", ")
}
