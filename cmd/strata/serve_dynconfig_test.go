package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratalog/strata/engine"
	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/internal/stratatest"
	"github.com/stratalog/strata/internal/tlstest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// strata serve's Reconfigure: dynamic connection limits come back as
// netpoll limits; a listener's keystore changed at runtime is checked,
// then put in force on the listener being served (apply only); a store
// that does not load or a bad value is refused naming the key.
func TestDynamicReconfigure(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	first, second := ca.Server(t, dir, "first"), ca.Server(t, dir, "second")
	cfg := config.Defaults()
	if err := cfg.Apply(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.location": first.Path,
		"max.connections": "100"}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Finish(); err != nil {
		t.Fatal(err)
	}
	live := cfg.Listeners[1].SSL
	eng, err := engine.Open(engine.Options{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	reconf := dynamicReconfigure(cfg, eng)
	dyn := map[string]string{"max.connections": "5", "listener.name.ssl.max.connections": "2", "ssl.keystore.location": second.Path,
		"log.cleaner.io.max.bytes.per.second": "1048576", "log.cleaner.backoff.ms": "1000", "log.dir.min.free.bytes": "0"}
	if eng.FreeSpace().FloorBytes == 0 {
		t.Fatal("the free-space floor is off before the dynamic config")
	}
	if l, err := reconf(dyn, false); err != nil || l != nil {
		t.Fatalf("check: %v %v", l, err)
	}
	if ks, _ := live.Locations(); ks != first.Path {
		t.Fatal("a check changed the keystore")
	}
	l, err := reconf(dyn, true)
	if err != nil {
		t.Fatal(err)
	}
	if l.MaxConnections != 5 || l.Listeners["SSL"].MaxConnections != 2 {
		t.Fatalf("limits %+v", l)
	}
	if ks, _ := live.Locations(); ks != second.Path {
		t.Fatalf("keystore in force %s, want %s", ks, second.Path)
	}
	if rate, backoff := eng.CleanerThrottle(); rate != 1048576 || backoff != time.Second {
		t.Fatalf("cleaner throttle %d %v, want 1048576 1s", rate, backoff)
	}
	if fl := eng.FreeSpace().FloorBytes; fl != 0 {
		t.Fatalf("log.dir.min.free.bytes=0 set at runtime: the floor is still %d bytes", fl)
	}
	for k, v := range map[string]string{"ssl.keystore.location": ca.Path, "max.connections": "-5"} {
		if _, err := reconf(map[string]string{k: v}, false); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v, want an error naming the key", k, v, err)
		}
	}
	// Back to the properties file's keystore when the dynamic one goes.
	if _, err := reconf(map[string]string{}, true); err != nil {
		t.Fatal(err)
	}
	if ks, _ := live.Locations(); ks != first.Path {
		t.Fatalf("keystore after the dynamic one is deleted: %s", ks)
	}
	if rate, backoff := eng.CleanerThrottle(); rate == 1048576 || backoff != 15*time.Second {
		t.Fatalf("cleaner throttle after the dynamic one is deleted: %d %v", rate, backoff)
	}
	if eng.FreeSpace().FloorBytes == 0 {
		t.Fatal("the free-space floor stayed off after the dynamic config was deleted")
	}
}

// strata serve, end to end: with kadm (IncrementalAlterConfigs on the
// BROKER resources) an SSL listener's keystore is switched without a
// restart (the next handshake presents the new certificate), a
// max.connections.per.ip override limits new connections, and a default
// retention is set; DescribeConfigs reports their sources; a restart of
// the binary keeps all three (the data directory's file).
func TestServeDynamicBrokerConfigs(t *testing.T) {
	const hangGuard = 2 * time.Minute // not a performance threshold
	bin, cleanup, err := stratatest.BuildBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ca")
	first, second := ca.Server(t, dir, "first"), ca.Server(t, dir, "second")
	props := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(props, []byte(strings.Join([]string{
		"log.dirs=" + filepath.Join(dir, "data"),
		"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"ssl.keystore.location=" + first.Path,
	}, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func() (plain, ssl string, stop func()) {
		t.Helper()
		logs := &stratatest.LogBuffer{}
		cmd := exec.Command(bin, "serve", "--config", props)
		cmd.Stderr = logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() { cmd.Process.Kill() })
		deadline := time.After(hangGuard)
		wait := func(re *regexp.Regexp) []string {
			t.Helper()
			for {
				if m := re.FindStringSubmatch(logs.String()); m != nil {
					return m
				}
				select {
				case err := <-exited:
					t.Fatalf("strata serve exited: %v\n%s", err, logs)
				case <-deadline:
					t.Fatalf("strata serve never logged %s\n%s", re, logs)
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
		plain = wait(regexp.MustCompile(`msg="strata broker listening".* listener=PLAINTEXT .*listen=(\S+)`))[1]
		ssl = wait(regexp.MustCompile(`msg="strata broker listening".* listener=SSL .*listen=(\S+)`))[1]
		return plain, ssl, func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(hangGuard):
				t.Fatal("strata serve did not stop on SIGTERM")
			}
		}
	}
	servedCert := func(addr string) string {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("TLS to %s: %v", addr, err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	plain, ssl, stop := start()
	if got := servedCert(ssl); got != "first" {
		t.Fatalf("serving %s", got)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(plain))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	alter := func(cfgs []kadm.AlterConfig, brokers ...int32) error {
		rs, err := adm.AlterBrokerConfigs(ctx, cfgs, brokers...)
		if err != nil {
			return err
		}
		if len(rs) != 1 {
			return fmt.Errorf("%d responses", len(rs))
		}
		if rs[0].Err != nil {
			return fmt.Errorf("%w: %s", rs[0].Err, rs[0].ErrMessage)
		}
		return nil
	}
	// A keystore that does not load is refused, naming the key.
	if err := alter([]kadm.AlterConfig{{Name: "ssl.keystore.location", Value: kadm.StringPtr(ca.Path)}}, 0); err == nil || !strings.Contains(err.Error(), "ssl.keystore.location") {
		t.Fatalf("a keystore without a key: %v", err)
	}
	if err := alter([]kadm.AlterConfig{{Name: "ssl.keystore.location", Value: kadm.StringPtr(second.Path)}}, 0); err != nil {
		t.Fatal(err)
	}
	if got := servedCert(ssl); got != "second" {
		t.Fatalf("after the dynamic keystore: serving %s", got)
	}
	if err := alter([]kadm.AlterConfig{
		{Name: "max.connections.per.ip.overrides", Value: kadm.StringPtr("127.0.0.5:1")},
		{Name: "log.retention.ms", Value: kadm.StringPtr("3600000")},
	}); err != nil {
		t.Fatal(err)
	}
	c1 := dialKafka(t, "127.0.0.5", plain)
	if err := apiVersions(c1, 1, hangGuard); err != nil {
		t.Fatalf("the first connection from 127.0.0.5: %v", err)
	}
	if err := apiVersions(dialKafka(t, "127.0.0.5", plain), 2, hangGuard); err == nil || os.IsTimeout(err) {
		t.Fatalf("a second connection from 127.0.0.5 (max.connections.per.ip.overrides=127.0.0.5:1 set at runtime): %v, want it closed", err)
	}
	c1.Close()
	checkDescribe := func() {
		t.Helper()
		rcs, err := adm.DescribeBrokerConfigs(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("0", nil)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"ssl.keystore.location":            second.Path + " DYNAMIC_BROKER_CONFIG",
			"max.connections.per.ip.overrides": "127.0.0.5:1 DYNAMIC_DEFAULT_BROKER_CONFIG",
			"log.retention.ms":                 "3600000 DYNAMIC_DEFAULT_BROKER_CONFIG",
		}
		for _, c := range rc.Configs {
			if w, ok := want[c.Key]; ok {
				if got := c.MaybeValue() + " " + c.Source.String(); got != w {
					t.Errorf("%s = %s, want %s", c.Key, got, w)
				}
				delete(want, c.Key)
			}
		}
		if len(want) != 0 {
			t.Errorf("not described: %v", want)
		}
	}
	checkDescribe()
	cl.Close()
	stop()

	plain, ssl, stop = start()
	defer stop()
	if got := servedCert(ssl); got != "second" {
		t.Fatalf("after a restart: serving %s", got)
	}
	cl, err = kgo.NewClient(kgo.SeedBrokers(plain))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm = kadm.NewClient(cl)
	checkDescribe()
}
