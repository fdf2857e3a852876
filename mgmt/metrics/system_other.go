//go:build !linux

package metrics

// On systems other than Linux the node's disk and file-descriptor figures are
// not read yet; their families are left out of the scrape.

func diskAvailable(string) (uint64, error) { return 0, errUnsupported }

func openFDs() (uint64, error) { return 0, errUnsupported }

func maxFDs() (uint64, error) { return 0, errUnsupported }
