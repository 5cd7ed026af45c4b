package uring

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fakeDetection points the io_uring_disabled sysctl at a temp file holding
// disabled and, if setupErr is non-nil, makes io_uring_setup fail with it.
// Tests using it must not run in parallel.
func fakeDetection(t *testing.T, disabled string, setupErr error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "io_uring_disabled")
	if err := os.WriteFile(path, []byte(disabled+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	oldPath, oldSetup := disabledSysctl, setupHook
	disabledSysctl = path
	if setupErr != nil {
		setupHook = func(uint32, *params) (int, error) { return -1, setupErr }
	}
	t.Cleanup(func() { disabledSysctl, setupHook = oldPath, oldSetup })
}

// TestDetectionFallsBack: where io_uring is disabled or refused, auto selects
// the pwrite backend with a log line naming the reason, the ring works, and
// a forced "uring" fails with ErrUnavailable (errors.ErrUnsupported).
func TestDetectionFallsBack(t *testing.T) {
	for _, tc := range []struct {
		name     string
		disabled string
		setupErr error
		logWant  string
	}{
		{"sysctl disabled=2", "2", nil, "kernel.io_uring_disabled=2"},
		{"no io_uring in kernel", "0", syscall.ENOSYS, "ENOSYS"},
		{"seccomp or group", "1", syscall.EPERM, "kernel.io_uring_disabled=1 or a seccomp filter"},
		{"old kernel", "0", syscall.EINVAL, "kernel too old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fakeDetection(t, tc.disabled, tc.setupErr)
			var logs logBuffer
			r, err := New(Config{Backend: BackendAuto, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Backend() != BackendPwrite {
				t.Fatalf("auto chose %s with io_uring unavailable", r.Backend())
			}
			if out := logs.String(); !strings.Contains(out, "falling back to pwrite") || !strings.Contains(out, tc.logWant) {
				t.Fatalf("log %q: want the fallback and %q", out, tc.logWant)
			}
			f := openTestFile(t, r, 0)
			if _, err := do(t, r, &Op{Code: OpWrite, File: f, Buf: []byte("fallback"), Off: 0}); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(f.Name()); string(got) != "fallback" {
				t.Fatalf("file holds %q", got)
			}

			_, err = New(Config{Backend: BackendUring, Logger: quietLogger()})
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errors.ErrUnsupported) {
				t.Fatalf("forced uring: %v, want ErrUnavailable", err)
			}
		})
	}
}

// TestDetectionHardError: a setup failure that is not "io_uring is
// unavailable" (here EMFILE) is an error even with auto: falling back would
// hide a broken process.
func TestDetectionHardError(t *testing.T) {
	fakeDetection(t, "0", syscall.EMFILE)
	_, err := New(Config{Logger: quietLogger()})
	if err == nil || errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("New with EMFILE from io_uring_setup: %v", err)
	}
}

// TestDetectionSysctlGroupOnly: io_uring_disabled=1 still tries the ring
// (this process may be in io_uring_group or privileged).
func TestDetectionSysctlGroupOnly(t *testing.T) {
	fakeDetection(t, "1", nil)
	r, err := New(Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Backend() != BackendUring {
		t.Fatalf("backend %s: io_uring_disabled=1 with a working setup must use the ring", r.Backend())
	}
}

// TestABI checks the Go layouts against the kernel ABI and that the offset
// validation rejects what the kernel could never return.
func TestABI(t *testing.T) {
	if err := checkABI(); err != nil {
		t.Fatal(err)
	}
	good := params{sqEntries: 8, cqEntries: 16}
	good.sqOff = sqringOffsets{head: 0, tail: 4, ringMask: 8, ringEntries: 12, flags: 16, dropped: 20, array: 64}
	good.cqOff = cqringOffsets{head: 0, tail: 4, ringMask: 8, ringEntries: 12, overflow: 16, cqes: 64}
	sqLen, cqLen := 64+4*8, 64+16*16
	if err := checkRingOffsets(&good, sqLen, cqLen); err != nil {
		t.Fatalf("valid offsets rejected: %v", err)
	}
	for name, mod := range map[string]func(p *params){
		"sq not pow2":       func(p *params) { p.sqEntries = 6 },
		"cq smaller":        func(p *params) { p.cqEntries = 4 },
		"array overflows":   func(p *params) { p.sqOff.array = 80 },
		"cqes misaligned":   func(p *params) { p.cqOff.cqes = 60 },
		"tail out of range": func(p *params) { p.sqOff.tail = 4000 },
		"head misaligned":   func(p *params) { p.cqOff.head = 2 },
	} {
		p := good
		mod(&p)
		if err := checkRingOffsets(&p, sqLen, cqLen); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
