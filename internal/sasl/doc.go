// Package sasl is the broker side of Kafka's SASL authentication (issue
// 20): the PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER server exchanges
// exactly as Apache Kafka runs them (PlainSaslServer, ScramSaslServer,
// OAuthBearerSaslServer: RFC 4616, RFC 5802 and RFC 7677 without SASLprep
// and without channel binding, RFC 7628 with JWTs validated as Kafka's
// OAuthBearerValidatorCallbackHandler or its unsecured default), the SCRAM
// credential store (salted and iterated: the password is never kept),
// JAAS option parsing for Kafka's `sasl.jaas.config` values, and the
// client side a broker uses to authenticate to another broker.
//
// Files:
//
//	sasl.go    mechanisms, Config (what a listener accepts), Exchange, AuthError
//	plain.go   the PLAIN server
//	scram.go   the SCRAM server, credentials (Salt, StoredKey, ServerKey)
//	oauth.go   the OAUTHBEARER server, JWT validation (signed or unsecured), JWKS
//	store.go   Store: SCRAM credentials by user and mechanism, optionally in a file
//	jaas.go    sasl.jaas.config parsing, the static credential key
//	client.go  Authenticate: SaslHandshake + SaslAuthenticate on a dialed conn
//	serve.go   Serve: the server side of those frames on an accepted conn (the controller port)
//
// Nothing here logs; error messages never contain a password.
package sasl
