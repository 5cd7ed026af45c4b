package auth

import (
	"path/filepath"
	"testing"
)

// TestReplace: Replace makes a set of ACLs / quotas the whole set (a
// cluster broker applying the replicated metadata), keeps it in the file
// for the next start, and refuses an invalid one without a change.
func TestReplace(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(Config{}, filepath.Join(dir, "acls.json"))
	if err != nil {
		t.Fatal(err)
	}
	read := Binding{ResourceType: ResourceTopic, ResourceName: "t", PatternType: PatternLiteral,
		Principal: "User:alice", Host: "*", Operation: OpRead, Permission: PermissionAllow}
	if err := a.Create([]Binding{{ResourceType: ResourceGroup, ResourceName: "g", PatternType: PatternLiteral,
		Principal: "User:bob", Host: "*", Operation: OpRead, Permission: PermissionAllow}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Replace([]Binding{read, read}); err != nil {
		t.Fatal(err)
	}
	if got := a.All(); len(got) != 1 || got[0] != read || !a.Authorize("User:alice", "h", OpDescribe, ResourceTopic, "t") ||
		a.Authorize("User:bob", "h", OpRead, ResourceGroup, "g") {
		t.Fatalf("after Replace: %v", got)
	}
	bad := read
	bad.PatternType = PatternAny
	if err := a.Replace([]Binding{bad}); err == nil || len(a.All()) != 1 {
		t.Fatalf("invalid Replace: %v, %d ACLs", err, len(a.All()))
	}
	again, err := Open(Config{}, filepath.Join(dir, "acls.json"))
	if err != nil || len(again.All()) != 1 || again.All()[0] != read {
		t.Fatalf("reopened: %v %v", err, again.All())
	}

	q, err := OpenQuotas(QuotaConfig{}, filepath.Join(dir, "quotas.json"))
	if err != nil {
		t.Fatal(err)
	}
	alice := QuotaEntity{User: EntityName{Set: true, Name: "alice"}}
	if err := q.Alter([]QuotaChange{{Entity: QuotaEntity{ClientID: EntityName{Set: true, Name: "c"}}, Type: QuotaProducerByteRate, Value: 5}}); err != nil {
		t.Fatal(err)
	}
	if err := q.Replace(map[QuotaEntity]map[string]float64{alice: {QuotaConsumerByteRate: 100}}); err != nil {
		t.Fatal(err)
	}
	if v, ok := q.Limit(QuotaConsumerByteRate, "alice", "x"); !ok || v != 100 || q.Sets(QuotaProducerByteRate) {
		t.Fatalf("after Replace: %v %v", v, ok)
	}
	if err := q.Replace(map[QuotaEntity]map[string]float64{alice: {"bogus": 1}}); err == nil {
		t.Fatal("Replace took an unknown quota type")
	}
	q2, err := OpenQuotas(QuotaConfig{}, filepath.Join(dir, "quotas.json"))
	if err != nil {
		t.Fatal(err)
	}
	if all := q2.All(); len(all) != 1 || all[alice][QuotaConsumerByteRate] != 100 {
		t.Fatalf("reopened quotas %v", all)
	}
}
