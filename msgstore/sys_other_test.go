//go:build !linux

package msgstore

import "syscall"

var errENOSPC = syscall.ENOSPC
