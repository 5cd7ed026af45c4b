package txnhost

// The host's Kafka client: the coordinator sends WriteTxnMarkers to the
// partition leaders, and partition leaders ask a remote coordinator to
// verify or add partitions (AddPartitionsToTxn v4), over the Kafka
// protocol — to this broker too, through its own listener, so the
// partition side has one entry point.
//
// Client keeps idle connections per address (at most maxIdleConns each); a
// request takes one (or dials), writes one frame, reads one response frame
// (bounded by maxResponseBytes before allocating) and gives the connection
// back; any error closes it.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/stratalog/strata/internal/kframe"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	maxIdleConns     = 4
	maxResponseBytes = 16 << 20
	requestTimeout   = 30 * time.Second
	apiVersionsKey   = 18
)

// Client sends requests to brokers for the coordinator. Its methods are
// safe for concurrent use.
type Client struct {
	fmtr *kmsg.RequestFormatter
	// dial is the inter-broker dialer (TLS if SSL); nil: plain TCP.
	dial  func(ctx context.Context, addr string) (net.Conn, error)
	clock Clock

	mu     sync.Mutex
	idle   map[string][]net.Conn
	corr   int32
	closed bool
}

// NewClient returns a client that names itself clientID, dials with dial
// (nil: plain TCP) and takes its deadlines from clock.
func NewClient(clientID string, dial func(ctx context.Context, addr string) (net.Conn, error), clock Clock) *Client {
	return &Client{
		fmtr:  kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)),
		dial:  dial,
		clock: clock,
		idle:  map[string][]net.Conn{},
	}
}

// Close closes the idle connections; requests after it fail.
func (b *Client) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, cs := range b.idle {
		for _, c := range cs {
			c.Close()
		}
	}
	b.idle = map[string][]net.Conn{}
}

// get returns a connection to addr (pooled: an idle one, unless fresh)
// and a correlation id.
func (b *Client) get(ctx context.Context, addr string, fresh bool) (c net.Conn, corr int32, pooled bool, err error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, 0, false, errors.New("txnhost: client closed")
	}
	b.corr++
	corr = b.corr
	if cs := b.idle[addr]; len(cs) > 0 && !fresh {
		c = cs[len(cs)-1]
		b.idle[addr] = cs[:len(cs)-1]
		b.mu.Unlock()
		return c, corr, true, nil
	}
	b.mu.Unlock()
	if b.dial != nil {
		c, err = b.dial(ctx, addr)
	} else {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	return c, corr, false, err
}

func (b *Client) put(addr string, c net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || len(b.idle[addr]) >= maxIdleConns {
		c.Close()
		return
	}
	b.idle[addr] = append(b.idle[addr], c)
}

// idleConns returns the idle connections to addr (tests).
func (b *Client) idleConns(addr string) []net.Conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]net.Conn(nil), b.idle[addr]...)
}

// RoundTrip sends req to addr and decodes the answer into resp. A pooled
// connection that fails (the peer closed it while idle) is retried once on
// a new one; the requests sent this way (markers, verification) are safe
// to repeat.
func (b *Client) RoundTrip(ctx context.Context, addr string, req kmsg.Request, resp kmsg.Response) error {
	err := b.roundTripOnce(ctx, addr, req, resp, false)
	var pe *pooledConnError
	if errors.As(err, &pe) && ctx.Err() == nil {
		err = b.roundTripOnce(ctx, addr, req, resp, true)
	}
	if errors.As(err, &pe) {
		err = pe.err
	}
	return err
}

// pooledConnError is the failure of a request on a pooled connection.
type pooledConnError struct{ err error }

func (e *pooledConnError) Error() string { return e.err.Error() }
func (e *pooledConnError) Unwrap() error { return e.err }

func (b *Client) roundTripOnce(ctx context.Context, addr string, req kmsg.Request, resp kmsg.Response, fresh bool) (err error) {
	c, corr, pooled, err := b.get(ctx, addr, fresh)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && pooled {
			err = &pooledConnError{err}
		}
	}()
	deadline := b.clock.Now().Add(requestTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	frame := b.fmtr.AppendRequest(nil, req, corr)
	if _, err := c.Write(frame); err != nil {
		c.Close()
		return err
	}
	body, err := kframe.ReadFrame(c, maxResponseBytes, nil)
	if err != nil {
		c.Close()
		return err
	}
	// ApiVersions answers with response header v0 at every version (KIP-511).
	rest, gotCorr, err := kframe.SplitResponseHeader(body, resp.IsFlexible() && resp.Key() != apiVersionsKey)
	if err != nil || gotCorr != corr {
		c.Close()
		if err == nil {
			err = fmt.Errorf("txnhost: response correlation id %d, expected %d", gotCorr, corr)
		}
		return err
	}
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(rest); err != nil {
		c.Close()
		return err
	}
	if stop() {
		c.SetDeadline(time.Time{})
		b.put(addr, c)
	} else {
		c.Close()
	}
	return nil
}
