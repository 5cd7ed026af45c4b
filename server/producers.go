package server

// TxnConfig configures producer ids, idempotence and transactions (issue 8).
type TxnConfig struct{}

// txnState is the Server's part for producer ids, idempotence and transactions (issue 8).
type txnState struct{}

// initTxn is called by New after the Server is built.
func (s *Server) initTxn() {}

// closeTxn is called by Close after connections are closed.
func (s *Server) closeTxn() {}
