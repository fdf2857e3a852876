package msgstore

// The -soak flag (internal/soakflag) must be defined in every test binary, so
// that "go test ./... -soak 10m" does not fail here with "flag provided but
// not defined".
import _ "github.com/warrenmq/warren/internal/soakflag"
