package engine

import (
	"errors"
	"testing"
)

func beginVerify(t *testing.T, l *Log, pid int64, epoch int16, want bool) {
	t.Helper()
	got, err := l.BeginTxnVerification(pid, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("BeginTxnVerification(%d, %d) = %v, want %v", pid, epoch, got, want)
	}
}

func guardCount(l *Log) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.producers.guards)
}

// TestTxnVerificationGuard: BeginTxnVerification asks for verification
// exactly when the producer has no transaction open at the batch's epoch,
// and a marker written between it and the append makes the append fail
// without moving the LSO (KIP-890's hanging-transaction race).
func TestTxnVerificationGuard(t *testing.T) {
	e := openEngine(t, t.TempDir(), nil)
	defer e.Close()
	l := mustTopic(t, e, "guard", 1, nil).Partition(0)

	// A producer the log never saw: verify, then append opens the txn.
	beginVerify(t, l, 5, 0, true)
	first := mustAppend(t, l, txnBatch(t, 5, 0, 0, 2)).BaseOffset
	l.EndTxnVerification(5)
	if n := guardCount(l); n != 0 {
		t.Fatalf("%d guards left after EndTxnVerification", n)
	}
	durable(t, l)
	wantLSO(t, l, first)

	// Open at this epoch: no verification; at another epoch: verification.
	beginVerify(t, l, 5, 0, false)
	l.EndTxnVerification(5)
	beginVerify(t, l, 5, 1, true)
	l.EndTxnVerification(5)

	// The transaction ends (a marker) between the check and the append: the
	// late batch is refused and opens nothing.
	beginVerify(t, l, 5, 0, false)
	mustMarker(t, l, 5, 0, 1, false)
	_, err := l.Append(txnBatch(t, 5, 0, 2, 1), 0)
	if !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("append after the marker: %v, want ErrInvalidTxnState", err)
	}
	l.EndTxnVerification(5)
	durable(t, l)
	end := l.LogEndOffset()
	wantLSO(t, l, end)
	if ps := l.Producers(); len(ps) != 1 || ps[0].CurrentTxnStartOffset != -1 {
		t.Fatalf("producers %+v: a transaction is open", ps)
	}

	// A fresh guard (the next transaction) is not affected by that marker.
	beginVerify(t, l, 5, 0, true)
	next := mustAppend(t, l, txnBatch(t, 5, 0, 2, 1)).BaseOffset
	l.EndTxnVerification(5)
	durable(t, l)
	wantLSO(t, l, next)

	// TV2: the next transaction (epoch 1) is verified while the previous
	// one (epoch 0) still waits for its marker, which carries epoch 1. That
	// marker ends the old transaction, not the guard.
	beginVerify(t, l, 5, 1, true)
	mustMarker(t, l, 5, 1, 1, true)
	tv2 := mustAppend(t, l, txnBatch(t, 5, 1, 0, 1)).BaseOffset
	l.EndTxnVerification(5)
	durable(t, l)
	wantLSO(t, l, tv2)
	// ... but a second marker (this transaction's) while guarded does.
	beginVerify(t, l, 5, 1, false)
	mustMarker(t, l, 5, 1, 1, true)
	if _, err := l.Append(txnBatch(t, 5, 1, 1, 1), 0); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("append after its own transaction's marker: %v, want ErrInvalidTxnState", err)
	}
	l.EndTxnVerification(5)

	// Guards nest; other producers are unaffected by a marker of pid 5.
	beginVerify(t, l, 5, 1, true)
	beginVerify(t, l, 5, 1, true)
	beginVerify(t, l, 6, 0, true)
	mustMarker(t, l, 5, 1, 1, false)
	mustAppend(t, l, txnBatch(t, 6, 0, 0, 1))
	l.EndTxnVerification(6)
	l.EndTxnVerification(5)
	if n := guardCount(l); n != 1 {
		t.Fatalf("%d guards, want producer 5's still held once", n)
	}
	l.EndTxnVerification(5)
	l.EndTxnVerification(5) // an extra release is harmless
	if n := guardCount(l); n != 0 {
		t.Fatalf("%d guards left", n)
	}

	// Appends without a guard (followers, the embedded API) are not checked.
	mustAppend(t, l, txnBatch(t, 5, 1, 1, 1))

	e.Close()
	if _, err := l.BeginTxnVerification(5, 1); err == nil {
		t.Fatal("BeginTxnVerification on a closed log succeeded")
	}
}
