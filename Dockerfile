# Multi-stage build: compile a static warren binary, ship it on a small base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/warren ./cmd/warren \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/warren /usr/local/bin/warren
# The data directory belongs to the image's nonroot user (65532), who runs warren.
COPY --from=build --chown=65532:65532 /out/data /var/lib/warren
VOLUME /var/lib/warren
EXPOSE 5672 15672 15692
# Listen on all interfaces; data in the volume. The guest user may only connect
# from loopback (as in RabbitMQ): configure a user for remote clients.
ENTRYPOINT ["/usr/local/bin/warren", "--data-dir", "/var/lib/warren"]
