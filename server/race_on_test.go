//go:build race

package server

// raceDetector: the race detector's runtime allocates beside the code it
// watches (kmsg decoding measured 1.4-2x its plain allocation), so the
// byte-for-byte allocation bounds are checked in plain builds only;
// scripts/test runs them so (the rest of those tests runs in both).
const raceDetector = true
