//go:build !race

package amqp

// raceEnabled reports whether the race detector is on; it allocates, so
// allocation counts are not checked under it.
const raceEnabled = false
