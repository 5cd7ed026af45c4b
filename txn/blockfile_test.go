package txn_test

import (
	"testing"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/txn"
)

// The engine's Open leaves the producer id block file alone by name: txn's
// file must be that name, or a restart of a single broker would find the
// engine treating it as a stray file.
func TestBlockFileNameIsTheEngines(t *testing.T) {
	if txn.BlockFileName != engine.ProducerIDBlockFile {
		t.Fatalf("txn.BlockFileName %q, engine.ProducerIDBlockFile %q", txn.BlockFileName, engine.ProducerIDBlockFile)
	}
}
