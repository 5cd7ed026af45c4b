package sasl

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// run drives a client mechanism against a server exchange.
func run(t *testing.T, cfg *Config, mech kgosasl.Mechanism) (string, error) {
	t.Helper()
	ex, err := cfg.Start(mech.Name())
	if err != nil {
		return "", err
	}
	sess, msg, err := mech.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		out, done, err := ex.Step(msg)
		if err != nil {
			return "", err
		}
		cdone, next, cerr := sess.Challenge(out)
		if cerr != nil {
			t.Fatalf("client refused the server's answer: %v", cerr)
		}
		if done {
			if !cdone {
				t.Fatal("server done, client not")
			}
			return ex.Principal(), nil
		}
		msg = next
	}
	t.Fatal("exchange did not end")
	return "", nil
}

func TestScramWithFranzGoClient(t *testing.T) {
	store := NewStore()
	cfg := &Config{Mechanisms: []string{ScramSHA256, ScramSHA512}, Scram: store}
	for _, m := range []string{ScramSHA256, ScramSHA512} {
		c, err := NewCredential(m, "pw,=ü", 4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Set("a,b=c", m, c); err != nil { // escaped in the saslname
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		mech     kgosasl.Mechanism
		wantPrin string
	}{
		{scram.Auth{User: "a,b=c", Pass: "pw,=ü"}.AsSha256Mechanism(), "User:a,b=c"},
		{scram.Auth{User: "a,b=c", Pass: "pw,=ü"}.AsSha512Mechanism(), "User:a,b=c"},
		{scram.Auth{User: "a,b=c", Pass: "wrong"}.AsSha512Mechanism(), ""},
		{scram.Auth{User: "nobody", Pass: "pw,=ü"}.AsSha256Mechanism(), ""},
		{scram.Auth{User: "a,b=c", Pass: "pw,=ü", IsToken: true}.AsSha256Mechanism(), ""},
	} {
		p, err := run(t, cfg, c.mech)
		if c.wantPrin == "" {
			if !IsAuthError(err) {
				t.Fatalf("%s: err %v, want an AuthError", c.mech.Name(), err)
			}
			if strings.Contains(err.Error(), "pw") {
				t.Fatalf("error %q quotes the password", err)
			}
			continue
		}
		if err != nil || p != c.wantPrin {
			t.Fatalf("%s: principal %q, err %v", c.mech.Name(), p, err)
		}
	}
}

// RFC 7677's SCRAM-SHA-256 example (user "user", password "pencil"): the
// server with the RFC's salt and nonce answers the RFC's server-final.
func TestScramRFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := SaltedPassword(ScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := CredentialFromSalted(ScramSHA256, salted, salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	s := &scramServer{mech: ScramSHA256, store: NewStore()}
	s.store.Set("user", ScramSHA256, cred)
	if _, _, err := s.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO")); err != nil {
		t.Fatal(err)
	}
	// Replace the random server nonce with the RFC's.
	s.nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	s.srvFirst = "r=" + s.nonce + ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	out, done, err := s.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatalf("client-final: %v", err)
	}
	if got := string(out); got != "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Fatalf("server-final %q", got)
	}
	if s.Principal() != "User:user" {
		t.Fatalf("principal %q", s.Principal())
	}
}

func TestPlain(t *testing.T) {
	cfg := &Config{Mechanisms: []string{Plain}, PlainUsers: map[string]string{"alice": "alice-secret"}}
	for _, c := range []struct {
		token, principal, err string
	}{
		{"\x00alice\x00alice-secret", "User:alice", ""},
		{"alice\x00alice\x00alice-secret", "User:alice", ""},
		{"bob\x00alice\x00alice-secret", "", "different from username"},
		{"\x00alice\x00wrong", "", "Invalid username or password"},
		{"\x00bob\x00alice-secret", "", "Invalid username or password"},
		{"\x00\x00x", "", "username not specified"},
		{"\x00alice\x00", "", "password not specified"},
		{"alice-secret", "", "expected 3 tokens"},
	} {
		ex, err := cfg.Start(Plain)
		if err != nil {
			t.Fatal(err)
		}
		out, done, err := ex.Step([]byte(c.token))
		if c.err != "" {
			if !IsAuthError(err) || !strings.Contains(err.Error(), c.err) || done {
				t.Fatalf("%q: %v, want %q", c.token, err, c.err)
			}
			continue
		}
		if err != nil || !done || len(out) != 0 || ex.Principal() != c.principal {
			t.Fatalf("%q: out %q done %v err %v principal %q", c.token, out, done, err, ex.Principal())
		}
	}
	if _, err := cfg.Start(ScramSHA256); !IsAuthError(err) {
		t.Fatalf("a mechanism not enabled started: %v", err)
	}
}

func TestParseJAAS(t *testing.T) {
	j, err := ParseJAAS(`org.apache.kafka.common.security.plain.PlainLoginModule required
		username="admin" password="admin-secret"
		user_admin="admin-secret" user_alice="al\"ice;x" ;`)
	if err != nil {
		t.Fatal(err)
	}
	if j.Module != PlainLoginModule || j.Flag != "required" || j.Options["username"] != "admin" {
		t.Fatalf("%+v", j)
	}
	users := j.PlainUsers()
	if len(users) != 2 || users["alice"] != `al"ice;x` || users["admin"] != "admin-secret" {
		t.Fatalf("users %v", users)
	}
	for _, bad := range []string{
		``,
		`org.apache.kafka.common.security.plain.PlainLoginModule user_a="b";`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required user_a="secret-value"`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required user_a="secret-value;`,
		`X required a=b; Y required c=d;`,
	} {
		if _, err := ParseJAAS(bad); err == nil {
			t.Fatalf("%q parsed", bad)
		} else if strings.Contains(err.Error(), "secret-value") {
			t.Fatalf("error quotes a value: %v", err)
		}
	}
}

func TestParseScramCredentials(t *testing.T) {
	salt := []byte("salty")
	salted, _ := SaltedPassword(ScramSHA512, "s3cret", salt, 8192)
	v := `SCRAM-SHA-256=[name=alice,password=alice-secret] ;
	      SCRAM-SHA-512=[name=bob,iterations=8192,salt="` + base64.StdEncoding.EncodeToString(salt) +
		`",saltedpassword="` + base64.StdEncoding.EncodeToString(salted) + `"]`
	store := NewStore()
	if err := ParseScramCredentials(v, func(u, m string, c ScramCredential) { store.Set(u, m, c) }); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Mechanisms: []string{ScramSHA256, ScramSHA512}, Scram: store}
	if p, err := run(t, cfg, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()); err != nil || p != "User:alice" {
		t.Fatalf("alice: %q %v", p, err)
	}
	if p, err := run(t, cfg, scram.Auth{User: "bob", Pass: "s3cret"}.AsSha512Mechanism()); err != nil || p != "User:bob" {
		t.Fatalf("bob: %q %v", p, err)
	}
	for _, bad := range []string{
		`SCRAM-SHA-1=[name=a,password=b]`,
		`SCRAM-SHA-256=[password=b]`,
		`SCRAM-SHA-256=[name=a,password=b,iterations=100]`,
		`SCRAM-SHA-256=[name=a,password=b`,
		`SCRAM-SHA-256=[name=a,salt="!!",saltedpassword="x"]`,
	} {
		if err := ParseScramCredentials(bad, func(string, string, ScramCredential) {}); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
}

// A Store with a file keeps its credentials across opens, never the
// password, and a failed update changes nothing.
func TestStorePersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scram.json")
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := NewCredential(ScramSHA256, "the-password", 4096)
	if err := s.Set("alice", ScramSHA256, c); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), "the-password") || !strings.Contains(string(b), "alice") {
		t.Fatalf("file:\n%s", b)
	}
	s2, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Mechanisms: []string{ScramSHA256}, Scram: s2}
	if p, err := run(t, cfg, scram.Auth{User: "alice", Pass: "the-password"}.AsSha256Mechanism()); err != nil || p != "User:alice" {
		t.Fatalf("after reopen: %q %v", p, err)
	}
	os.Chmod(filepath.Dir(path), 0o500)
	defer os.Chmod(filepath.Dir(path), 0o700)
	if os.Geteuid() != 0 { // root writes anyway
		if err := s2.Update(func(tx *StoreTx) error { tx.Delete("alice", ScramSHA256); return nil }); err == nil {
			t.Fatal("update in a read-only directory succeeded")
		}
		if _, ok := s2.Get("alice", ScramSHA256); !ok {
			t.Fatal("a failed update changed the store")
		}
	}
}

// No input makes an exchange panic; fuzzed in FuzzScram.
func FuzzScram(f *testing.F) {
	f.Add([]byte("n,,n=user,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add([]byte("n,a=x,n=x,r=\x01"), []byte(",p="))
	store := NewStore()
	c, _ := NewCredential(ScramSHA256, "pw", 4096)
	store.Set("user", ScramSHA256, c)
	cfg := &Config{Mechanisms: []string{ScramSHA256, Plain}, Scram: store, PlainUsers: map[string]string{"user": "pw"}}
	f.Fuzz(func(t *testing.T, first, final []byte) {
		ex, _ := cfg.Start(ScramSHA256)
		_, _, err := ex.Step(first)
		if _, done, _ := ex.Step(final); done && (err != nil || ex.Principal() != "User:user") {
			t.Fatalf("authenticated after %v as %q", err, ex.Principal())
		}
		p, _ := cfg.Start(Plain)
		p.Step(first)
	})
}
