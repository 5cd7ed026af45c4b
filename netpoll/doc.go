// Package netpoll owns the broker's client connections: it accepts TCP
// connections, cuts the byte stream into Kafka frames, hands each frame to a
// Handler, and writes the responses back in request order, with pipelining,
// buffer reuse and zero-copy file writes. It knows nothing of Kafka beyond
// the size prefix.
//
// # Wire format
//
// Both directions carry frames:
//
//	size    int32, big-endian: the number of bytes that follow (0 <= size)
//	payload size bytes (a request, or a response)
//
// A request whose size is negative or larger than Config.MaxFrameBytes
// (Kafka's socket.request.max.bytes) is refused before any payload buffer is
// allocated: netpoll logs one line with the remote address and closes the
// connection. Handlers see the payload only; netpoll adds the size prefix to
// responses. A SendParts response is
//
//	size    int32 = sum of the parts' lengths
//	part 0  Buf bytes, or File[Off : Off+Len] (sendfile(2), by offset)
//	part 1  ...
//
// # Pipelining
//
// Each connection has a ring of Config.MaxInFlight reply slots (a Reply is a
// slot). The reader takes the next free slot before it reads a frame, so when
// every slot holds an unanswered request the reader stops reading the socket:
// back-pressure reaches the client through TCP flow control. The writer waits
// for the oldest slot to complete, then writes every consecutive completed
// slot in one pass (coalesced into writev calls, sendfile for file parts) and
// frees them. Replies may therefore complete in any order; responses leave in
// request order.
//
//	slots:  [ free | free | pending | ready | pending | ready | free ... ]
//	                       ^ head (writer)                    ^ tail (reader)
//
// A slot moves free → pending (reader published it and called Serve) →
// ready (the handler completed it) → free (the writer wrote it, called the
// SendParts done callback and returned the frame buffer to its pool). A slot
// completed after its connection died goes pending → done directly: the
// response is dropped, the done callback still runs and the frame buffer is
// still returned.
//
// # Queued bytes
//
// Slots bound the number of unanswered requests; two byte bounds apply to
// their frames, both taken after the size prefix is read and before the
// payload is read or allocated, and both given back when the slot is freed
// (after the response is written, since the frame lives until then, or when
// the reply is dropped with its connection):
//
//   - Config.MaxQueuedBytes (queued.max.request.bytes, KIP-72's memory pool)
//     is one budget for the whole Server: the frames of every connection,
//     plus what handlers reserve for them with Reply.Reserve (the decoded
//     request). While a frame does not fit the reader waits without reading
//     its socket, so the client's writes block in TCP instead of the
//     broker's memory growing; waiters are served in arrival order, Reserve
//     calls (whose frames are already in) before new frames. A frame larger
//     than the whole budget is refused like one above MaxFrameBytes (one
//     rate-limited log line, then close): it could never be admitted.
//   - Config.QueuedMaxRequestBytes is each connection's share: a frame that
//     would take its connection past it waits until earlier replies are
//     written, unless nothing is queued on the connection. It keeps one
//     connection (a client that stops reading its responses pins its own
//     queued requests) from holding the whole budget.
//
// The budget's deadlock rule: when every byte in use is held by readers
// waiting in Reserve, nobody will give bytes back, so the oldest of them is
// granted past the limit; used stays within the budget plus one
// reservation. Reservations wait on handlers and writers only; a handler that
// waits for another request to be read (an acks=all produce waiting for a
// follower's fetch on the same broker) stalls until its own timeout when the
// budget is full of such requests, as in Kafka. A peer that announces a
// frame and sends nothing holds the frame's bytes until the idle timeout
// (connections.max.idle.ms) closes it.
//
// # Buffers
//
// Frame buffers come from size-classed pools (powers of two from 512 B to
// 16 MiB, never a class above MaxFrameBytes except the smallest). A larger
// frame gets an unpooled buffer that grows, doubling from 1 MiB up to exactly
// its size, as its bytes arrive, so a peer that announces a large frame and
// sends little of it does not cost the whole size in memory (the payload read
// and the size check are internal/kframe's, the module's one Kafka frame
// reader; the connection reader keeps its own loop around them, see
// frame.go). A pooled frame of at least Config.SumFramesFrom bytes is read
// at most 128 KiB at a time and each piece's 1 KiB blocks are checksummed
// (CRC-32C) right after it arrives, while they are in the CPU's cache;
// the sums live with the frame buffer (Reply.Sums), and the broker checks
// a large produce request's batch CRCs from them (internal/crcsum). A
// frame stays valid
// and unmodified until its response is written or dropped, which is after
// the Reply completes, so a handler may send (parts of) the frame back as the
// response. Send and SendParts take the response bytes, and the files'
// contents, by reference: the caller must not modify them until they are
// written — for SendParts, until done is called.
//
// # Goroutines and locks
//
// Every goroutine belongs to the Server and Server.Close waits for all of
// them: the accept loop (the goroutine that called Serve), and per connection
// one reader (reads frames, calls Handler.Serve sequentially) and one writer
// (writes responses). Handler goroutines that complete replies later are the
// handler's own; after Close they find their connection dead and their
// replies are dropped. Handler.Serve must not call Server.Close (Close waits
// for the reader that is running Serve). A Handler that also implements
// ConnCloseHandler is told once when each connection closes, on the closing
// goroutine, so work parked for the connection (a long poll) can end without
// a goroutine of its own watching Done.
//
// Locks: Server.mu guards the listener and connection sets; Conn.mu guards a
// connection's slot ring (head, tail, slot states) and its closed/closing
// flags. They are never held together. No lock is held while calling the
// Handler, a done callback, or doing I/O.
//
// # Files
//
// File parts are written with sendfile(2) through the socket's
// syscall.RawConn, so a full socket buffer parks the writer on the runtime
// poller instead of a thread; the file offset is passed explicitly, so the
// file's own offset never moves and one *os.File can serve many connections
// at once. Where sendfile is unavailable (another OS, a connection that is not
// a socket, or a kernel that refuses the file) netpoll falls back to
// pread + write through a pooled 64 KiB buffer. A file shorter than a part
// says is a broken frame: the connection is closed.
//
// # Listeners and TLS
//
// ServeListener serves a named listener (Kafka's listener names:
// PLAINTEXT, SSL, INTERNAL...; Conn.Listener reports it so Metadata can
// answer with that listener's addresses). A Listener with a tls.Config is
// an SSL listener: the reader runs the TLS handshake before the first frame
// (bounded by Listener.HandshakeTimeout, on the Config's clock), sets the
// connection's principal (Conn.Principal: "User:ANONYMOUS", or the
// verified client certificate's, Listener.Principal) and TLS state, and
// only then reads frames. A failed handshake closes the connection with one
// rate-limited log line naming the listener; a PLAINTEXT Kafka client on an
// SSL listener is logged as exactly that.
//
// # Connection limits
//
// Config.Limits (SetConnLimits at runtime) applies Kafka's connection
// limits as each connection is accepted (limits.go has the rules):
// connection creation rates broker-wide and per listener hold the accept
// loop for their throttle time; max.connections (broker and listener)
// holds it until a connection closes, so clients past the limit wait in
// the kernel's backlog, unread; max.connections.per.ip closes a
// connection past its address's limit at once. The inter-broker listener
// is exempt from the broker-wide limits while another listener is served
// and, past max.connections, closes the least recently active connection
// of another listener. Every accepted connection is counted per address
// and listener (ConnsFrom, ListenerConns) until it closes.
//
// Authentication in the protocol (Kafka's SASL) is the handler's: it keeps
// its per-connection state in Conn.SetSession (reader goroutine only), reads
// its per-listener settings from Listener.Context (Conn.ListenerContext),
// and calls Conn.Authenticated with the principal, which replaces the one
// Conn.Principal reports and lifts Listener.UnauthenticatedMaxFrameBytes:
// until then a larger frame closes the connection before it is read.
//
// On a TLS connection sendfile cannot be used (the kernel would send the
// file's bytes unencrypted): file parts take the pread + write path, through
// the TLS connection, and the gathered buffers of a write pass go through a
// 16 KiB buffer (one TLS record) instead of writev, so a run of small
// responses costs one record and one system call, not one per buffer. The
// connection is closed by closing its socket (no close_notify alert, which
// could wait on a peer that does not read).
package netpoll
