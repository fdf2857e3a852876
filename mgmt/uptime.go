package mgmt

import "time"

// processStart approximates the process start: package initialisation runs
// before main.
var processStart = time.Now()

// processUptimeMillis is the node's uptime in milliseconds, as RabbitMQ
// reports it.
func processUptimeMillis() int64 { return time.Since(processStart).Milliseconds() }
