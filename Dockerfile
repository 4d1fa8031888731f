# syntax=docker/dockerfile:1
# The operator and every plugin under plugins/, static (CGO_ENABLED=0), on an empty base,
# run as a non-root user. The plugins sit in /usr/local/lib/stepwise/plugins with their
# SHA-256 in SHA256SUMS there, which the operator checks before it starts one.
#
#   docker build -t REGISTRY/stepwise-operator:TAG .
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# As `make build plugins` does, without make (not in the Go image).
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    set -eu; \
    mkdir -p /out/plugins /out/tmp; \
    go build -ldflags='-s -w' -o /out/stepwise-operator ./cmd/stepwise-operator; \
    go build -ldflags='-s -w' -o /out/stepwise-copy ./cmd/stepwise-copy; \
    for dir in plugins/*/; do \
        name="$(basename "${dir}")"; \
        go build -ldflags='-s -w' -o "/out/plugins/stepwise-plugin-${name}" "./plugins/${name}"; \
    done; \
    cd /out/plugins && sha256sum stepwise-plugin-* > SHA256SUMS

FROM scratch
# Cloud plugins speak TLS to their APIs.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
# Plugins make their sockets in /tmp; in the cluster an emptyDir is mounted there, since
# the root filesystem is read-only.
COPY --from=build --chown=65532:65532 --chmod=1777 /out/tmp /tmp
COPY --from=build /out/stepwise-operator /usr/local/bin/stepwise-operator
# The chart runs it in each plugin's image to copy the plugin out without running its code.
COPY --from=build /out/stepwise-copy /usr/local/bin/stepwise-copy
COPY --from=build /out/plugins/ /usr/local/lib/stepwise/plugins/
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/stepwise-operator"]
CMD ["--plugin-dir=/usr/local/lib/stepwise/plugins"]
