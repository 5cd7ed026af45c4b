package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratalog/strata/internal/config"
	"github.com/stratalog/strata/internal/stratatest"
	"github.com/stratalog/strata/netpoll"
)

// apiVersions sends an ApiVersions v0 request with correlation id corr on
// c and reads the answer; an error means the broker closed the
// connection (or the guard ran out).
func apiVersions(c net.Conn, corr int32, guard time.Duration) error {
	req := make([]byte, 14)
	binary.BigEndian.PutUint32(req[0:], 10)
	binary.BigEndian.PutUint16(req[4:], 18) // ApiVersions
	binary.BigEndian.PutUint16(req[6:], 0)
	binary.BigEndian.PutUint32(req[8:], uint32(corr))
	binary.BigEndian.PutUint16(req[12:], 0xffff) // null client id
	c.SetDeadline(time.Now().Add(guard))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(req); err != nil {
		return err
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(hdr[0:])
	if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != corr || size < 4 || size > 1<<20 {
		return fmt.Errorf("ApiVersions answer: size %d, correlation id %d, want %d", size, got, corr)
	}
	_, err := io.CopyN(io.Discard, c, int64(size-4))
	return err
}

// dialKafka connects to addr from the local address from (127.0.0.x).
func dialKafka(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// strata serve with a properties file holding the connection limits
// (issue 20): max.connections.per.ip=2 serves two connections from
// 127.0.0.1 and closes the third at once (and serves one again after one
// closed); max.connections.per.ip.overrides=127.0.0.2:0 refuses
// 127.0.0.2's first; listener.name.external.max.connections=1 holds a
// second connection to EXTERNAL unanswered (logged) until the first
// closes, while PLAINTEXT goes on serving. Keys Kafka refuses stop the
// start with an error naming them.
func TestServeConnectionLimits(t *testing.T) {
	const hangGuard = 2 * time.Minute // not a performance threshold
	bin, cleanup, err := stratatest.BuildBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	dir := t.TempDir()
	writeProps := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		lines = append([]string{"log.dirs=" + filepath.Join(dir, "data-"+name)}, lines...)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Refused at start-up, the key named.
	for _, c := range []struct {
		lines []string
		key   string
	}{
		{[]string{"max.connections.per.ip=0"}, "max.connections.per.ip.overrides"},
		{[]string{"max.connections=-1"}, "max.connections"},
		{[]string{"max.connections.per.ip.overrides=127.0.0.1"}, "max.connections.per.ip.overrides"},
		{[]string{"listener.name.nosuch.max.connections=1"}, "listener.name.nosuch.max.connections"},
		{[]string{"listener.name.plaintext.max.connection.creation.rate=x"}, "listener.name.plaintext.max.connection.creation.rate"},
	} {
		// A start that is not refused is killed at the guard (and fails).
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		lines := append([]string{"listeners=PLAINTEXT://127.0.0.1:0"}, c.lines...)
		out, err := exec.CommandContext(ctx, bin, "serve", "--config", writeProps("bad.properties", lines...)).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), c.key) {
			t.Errorf("%v: strata serve: %v, output %q; want a failed start naming %s", c.lines, err, out, c.key)
		}
	}

	props := writeProps("server.properties",
		"listeners=PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
		"max.connections.per.ip=2",
		"max.connections.per.ip.overrides=127.0.0.2:0",
		"listener.name.external.max.connections=1")
	logs := &stratatest.LogBuffer{}
	cmd := exec.Command(bin, "serve", "--config", props)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() }) // after a failure; a no-op once it exited
	deadline := time.After(hangGuard)
	// waitLog waits for a log line matching re; false if the broker exited.
	waitLog := func(re *regexp.Regexp) []string {
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
	plain := waitLog(regexp.MustCompile(`msg="strata broker listening".* listener=PLAINTEXT .*listen=(\S+)`))[1]
	external := waitLog(regexp.MustCompile(`msg="strata broker listening".* listener=EXTERNAL .*listen=(\S+)`))[1]

	// max.connections.per.ip=2.
	p1, p2 := dialKafka(t, "127.0.0.1", plain), dialKafka(t, "127.0.0.1", plain)
	for i, c := range []net.Conn{p1, p2} {
		if err := apiVersions(c, int32(i), hangGuard); err != nil {
			t.Fatalf("connection %d from 127.0.0.1: %v", i+1, err)
		}
	}
	if err := apiVersions(dialKafka(t, "127.0.0.1", plain), 3, hangGuard); err == nil || os.IsTimeout(err) {
		t.Fatalf("the third connection from 127.0.0.1 (max.connections.per.ip=2): %v, want it closed by the broker", err)
	}
	waitLog(regexp.MustCompile(`rejected connection.*max.connections.per.ip.* remote_ip=127\.0\.0\.1 .*max=2`))
	if err := apiVersions(p2, 4, hangGuard); err != nil {
		t.Fatalf("an open connection after the third was refused: %v", err)
	}
	// The override: 127.0.0.2 may hold none.
	if err := apiVersions(dialKafka(t, "127.0.0.2", plain), 5, hangGuard); err == nil || os.IsTimeout(err) {
		t.Fatalf("a connection from 127.0.0.2 (override 0): %v, want it closed by the broker", err)
	}
	waitLog(regexp.MustCompile(`rejected connection.* remote_ip=127\.0\.0\.2 .*max=0`))
	// A closed connection frees its slot (once the broker has seen it
	// close: the attempts before that are refused).
	p1.Close()
	for attempt := 0; ; attempt++ {
		if attempt == 1000 {
			t.Fatal("127.0.0.1 never got a connection back after closing one")
		}
		if apiVersions(dialKafka(t, "127.0.0.1", plain), 6, hangGuard) == nil {
			break
		}
		select {
		case <-deadline:
			t.Fatal("127.0.0.1 never got a connection back after closing one")
		case <-time.After(10 * time.Millisecond):
		}
	}

	// listener.name.external.max.connections=1 (other addresses: the
	// per-IP limit is not what holds them).
	e1 := dialKafka(t, "127.0.0.3", external)
	if err := apiVersions(e1, 7, hangGuard); err != nil {
		t.Fatalf("the first EXTERNAL connection: %v", err)
	}
	e2 := dialKafka(t, "127.0.0.4", external)
	answered := make(chan error, 1)
	go func() { answered <- apiVersions(e2, 8, hangGuard) }()
	waitLog(regexp.MustCompile(`connection limit reached.* remote_ip=127\.0\.0\.4 listener=EXTERNAL .*listener_max_connections=1`))
	select {
	case err := <-answered:
		t.Fatalf("a second EXTERNAL connection past its listener's max.connections=1 was answered or closed: %v", err)
	default:
	}
	if err := apiVersions(dialKafka(t, "127.0.0.4", plain), 9, hangGuard); err != nil {
		t.Fatalf("PLAINTEXT while EXTERNAL is full: %v", err)
	}
	e1.Close()
	if err := <-answered; err != nil {
		t.Fatalf("the held EXTERNAL connection after the first closed: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("strata serve after SIGTERM: %v\n%s", err, logs)
		}
	case <-deadline:
		t.Fatal("strata serve did not exit after SIGTERM")
	}
}

// connLimits turns the config's keys into netpoll's limits: the
// broker-wide values, the overrides' host names resolved to addresses,
// the listeners that set their own, the inter-broker listener; a host
// that does not resolve stops the start naming the key.
func TestConnLimitsOf(t *testing.T) {
	load := func(props map[string]string) config.Broker {
		t.Helper()
		b := config.Defaults()
		if err := b.Apply(props); err != nil {
			t.Fatal(err)
		}
		if err := b.Finish(); err != nil {
			t.Fatal(err)
		}
		return b
	}
	l, err := connLimits(load(nil))
	if err != nil {
		t.Fatal(err)
	}
	if l.MaxConnections != netpoll.Unlimited || l.MaxConnectionsPerIP != netpoll.Unlimited ||
		l.MaxConnectionCreationRate != netpoll.Unlimited || len(l.Listeners) != 0 || len(l.MaxConnectionsPerIPByAddr) != 0 {
		t.Fatalf("defaults: %+v", l)
	}
	l, err = connLimits(load(map[string]string{
		"listeners":                               "PLAINTEXT://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
		"listener.security.protocol.map":          "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
		"max.connections":                         "50",
		"max.connections.per.ip":                  "0",
		"max.connections.per.ip.overrides":        "10.0.0.7:5,localhost:3",
		"max.connection.creation.rate":            "20",
		"listener.name.external.max.connections":  "9",
		"listener.name.plaintext.max.connections": "2147483647",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if l.MaxConnections != 50 || l.MaxConnectionsPerIP != 0 || l.MaxConnectionCreationRate != 20 || l.InterBrokerListener != "PLAINTEXT" {
		t.Fatalf("broker-wide: %+v", l)
	}
	if l.MaxConnectionsPerIPByAddr["10.0.0.7"] != 5 || l.MaxConnectionsPerIPByAddr["127.0.0.1"] != 3 {
		t.Fatalf("overrides: %v (localhost resolved to 127.0.0.1?)", l.MaxConnectionsPerIPByAddr)
	}
	want := map[string]netpoll.ListenerLimits{"EXTERNAL": {MaxConnections: 9, MaxConnectionCreationRate: netpoll.Unlimited}}
	if !maps.Equal(l.Listeners, want) {
		t.Fatalf("listeners: %v, want %v", l.Listeners, want)
	}
	_, err = connLimits(load(map[string]string{"max.connections.per.ip.overrides": "nosuch.invalid:1"}))
	if err == nil || !strings.Contains(err.Error(), "max.connections.per.ip.overrides: nosuch.invalid") {
		t.Fatalf("an unresolvable override: %v", err)
	}
}
