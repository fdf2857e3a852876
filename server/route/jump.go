package route

// The bucket choice of RabbitMQ 3.10's rabbitmq_consistent_hash_exchange:
// jump_consistent_hash/2 in rabbit_exchange_type_consistent_hash.erl, which is
// Lamping and Veach's jump consistent hash driven not by the paper's LCG but by
// Erlang's rand module: the state is rand:seed_s(exs1024, {K, K, K}) where K is
// phash2 of the hashed term, and each step draws rand:uniform_s/1 (a float in
// [0, 1)) and jumps to trunc((B + 1) / R). Reproducing it needs OTP's exs1024
// (xorshift1024*) seeded the way rand.erl seeds it, to the bit.

const (
	mask21 = 1<<21 - 1
	mask33 = 1<<33 - 1
	mask39 = 1<<39 - 1
	two64  = 18446744073709551616.0 // 2^64, exs1024's max + 1
)

// exs64Next is rand.erl's exs64_next/1 (xorshift64*): it returns the output
// and the new state.
func exs64Next(r uint64) (out, state uint64) {
	r1 := r ^ r>>12
	r2 := r1 ^ (r1&mask39)<<25
	r3 := r2 ^ r2>>27
	return r3 * 2685821657736338717, r3
}

// exs1024 is rand.erl's exs1024 state. rand.erl keeps it as two lists; the
// 16 words here are the same sequence seen as a ring, p indexing the head.
type exs1024 struct {
	s [16]uint64
	p int
}

// seed is exs1024_seed({A, A, A}) for the non-negative integer a.
func (x *exs1024) seed(a uint64) {
	b1 := ((a&mask21 + 1) * 2097131) & mask21
	b2 := ((a&mask21 + 1) * 2097133) & mask21
	b3 := ((a&mask21 + 1) * 2097143) & mask21
	r := b1<<43 | b2<<22 | b3<<1 | 1
	// exs1024_gen1024 prepends each output, so the last one generated is the head.
	for i := 15; i >= 0; i-- {
		x.s[i], r = exs64Next(r)
	}
	x.p = 0
}

// next is exs1024_next/1 (xorshift1024*).
func (x *exs1024) next() uint64 {
	s0 := x.s[x.p]
	x.p = (x.p + 1) & 15
	s1 := x.s[x.p]
	s11 := s1 ^ (s1&mask33)<<31
	s12 := s11 ^ s11>>11
	s01 := s0 ^ s0>>30
	ns1 := s01 ^ s12
	x.s[x.p] = ns1
	return ns1 * 1181783497276652981
}

// jumpBucket returns the bucket in [0, n) that the plugin picks for a term
// whose phash2 is key. n must be at least 1 and below 2^53.
func jumpBucket(key uint32, n int64) int64 {
	if n == 1 {
		return 0
	}
	var x exs1024
	x.seed(uint64(key))
	b, j := int64(-1), int64(0)
	for j < n {
		b = j
		// (B + 1) / R with R = V / 2^64 is (B + 1) * 2^64 / V to the bit:
		// scaling by a power of two is exact, so both round the same single
		// quotient, and this way costs one division instead of two.
		q := float64(b+1) * two64 / float64(x.next())
		// trunc(q) >= n exactly when q >= n, n being an integer. A draw of
		// exactly 0.0 makes q +Inf (Erlang would raise badarith): stop at b.
		if q >= float64(n) {
			return b
		}
		j = int64(q)
	}
	return b
}
