package server

// unackedList holds a channel's unsettled deliveries in delivery-tag order.
// Acks usually arrive in order, so removal from the front is O(1); a single
// ack in the middle is found by binary search.
type unackedList struct {
	items []delivery
	head  int
}

func (u *unackedList) len() int { return len(u.items) - u.head }

func (u *unackedList) push(d delivery) { u.items = append(u.items, d) }

// search returns the index (absolute) of the first item with tag >= tag.
func (u *unackedList) search(tag uint64) int {
	lo, hi := u.head, len(u.items)
	for lo < hi {
		mid := (lo + hi) / 2
		if u.items[mid].tag < tag {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// take removes the delivery with tag (and with multiple every earlier one;
// tag 0 with multiple means all) and appends them to dst in tag order. ok is
// false when tag is not outstanding.
func (u *unackedList) take(dst []delivery, tag uint64, multiple bool) ([]delivery, bool) {
	if multiple && tag == 0 {
		return u.takeAll(dst), true
	}
	i := u.search(tag)
	if i >= len(u.items) || u.items[i].tag != tag {
		if !multiple {
			return dst, false
		}
		// multiple=true with a tag already settled still settles earlier ones
		// only if the tag was delivered; RabbitMQ treats an unknown tag as an error.
		return dst, false
	}
	if multiple {
		dst = append(dst, u.items[u.head:i+1]...)
		clear(u.items[u.head : i+1])
		u.head = i + 1
	} else {
		dst = append(dst, u.items[i])
		if i == u.head {
			u.items[i] = delivery{}
			u.head++
		} else {
			copy(u.items[i:], u.items[i+1:])
			u.items[len(u.items)-1] = delivery{}
			u.items = u.items[:len(u.items)-1]
		}
	}
	u.compact()
	return dst, true
}

func (u *unackedList) takeAll(dst []delivery) []delivery {
	dst = append(dst, u.items[u.head:]...)
	clear(u.items)
	u.items, u.head = u.items[:0], 0
	return dst
}

// insert puts d back in tag order (tx rollback).
func (u *unackedList) insert(d delivery) {
	i := u.search(d.tag)
	if i == u.head && u.head > 0 {
		u.head--
		u.items[u.head] = d
		return
	}
	u.items = append(u.items, delivery{})
	copy(u.items[i+1:], u.items[i:])
	u.items[i] = d
}

func (u *unackedList) compact() {
	if u.head == len(u.items) {
		u.items, u.head = u.items[:0], 0
	} else if u.head >= 1024 && u.head*2 >= len(u.items) {
		n := copy(u.items, u.items[u.head:])
		clear(u.items[n:])
		u.items, u.head = u.items[:n], 0
	}
}
